#!/usr/bin/env bash
# Roll a new build of reticle out to a running host, with no failed request and
# without the MCP client noticing (the host keeps its pid and its client session).
#
#   deploy/rollout.sh                  build release binaries from this checkout and roll them out
#   deploy/rollout.sh --from DIR       roll out DIR/reticle and DIR/reticle-worker (already built)
#   deploy/rollout.sh --worker-only    only the worker (blue/green); the host keeps running as is
#   deploy/rollout.sh --rollback       return the workers to the previous binary
#
# Finds the host through its ready file ($MCP_READY_FILE, default /tmp/mcp.ready) or
# --socket PATH, exactly as `reticle ctl` does.
#
# Steps: (1) copy the new binaries into a release directory of their own
# ($RETICLE_RELEASES_DIR, default ~/.local/share/reticle/releases/<stamp>/), so a
# later build cannot change them under running processes and a rollback finds the old
# ones; (2) check that both answer --version; (3) blue/green worker rollout: green
# workers start from the new binary and must complete their handshake before any job
# goes to them, blue workers finish their jobs and stop, and if green fails the host
# stays on blue and this script stops with the error; (4) host self-reexec onto the new
# host binary; (5) print health. Every step is in the host's event log
# (`reticle ctl events --since 10m`).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
from=""
worker_only=0
rollback=0
ctl_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --from) from="$2"; shift 2 ;;
    --worker-only) worker_only=1; shift ;;
    --rollback) rollback=1; shift ;;
    --socket) ctl_args+=(--socket "$2"); shift 2 ;;
    --ready-file) ctl_args+=(--ready-file "$2"); shift 2 ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "rollout.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

say() { echo "rollout: $*" >&2; }

if [ -z "$from" ]; then
  say "building release binaries"
  cargo build --quiet --release --locked --manifest-path "$here/Cargo.toml" --bin reticle --bin reticle-worker >&2
  from="$here/target/release"
fi
ctl_bin="$from/reticle"
[ -x "$ctl_bin" ] || { say "no reticle binary in $from"; exit 2; }
ctl() { "$ctl_bin" ctl "${ctl_args[@]}" "$@"; }

if [ "$rollback" -eq 1 ]; then
  say "rolling the workers back to the previous binary"
  ctl rollback >&2
  ctl health
  exit 0
fi

stamp="$(date -u +%Y%m%dT%H%M%SZ)-$$"
releases="${RETICLE_RELEASES_DIR:-${XDG_DATA_HOME:-$HOME/.local/share}/reticle/releases}"
release="$releases/$stamp"
mkdir -p "$release"
chmod 700 "$releases" "$release"
cp "$from/reticle" "$from/reticle-worker" "$release/"
say "release $release"

for bin in reticle reticle-worker; do
  version="$("$release/$bin" --version)" || { say "$release/$bin --version failed"; exit 1; }
  say "$bin: $version"
done

say "blue/green worker rollout"
if ! ctl rollout --worker-bin "$release/reticle-worker" >&2; then
  say "the new workers did not come up; the host still serves the previous ones"
  exit 1
fi

if [ "$worker_only" -eq 0 ]; then
  say "host self-reexec"
  if ! ctl reexec --bin "$release/reticle" >&2; then
    say "host reexec failed; the workers already run the new binary (deploy/rollout.sh --rollback returns them)"
    exit 1
  fi
fi

ctl health
