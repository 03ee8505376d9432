#!/usr/bin/env bash
# Installs what reticle needs on a Debian-like machine that has only the Rust
# toolchain. Idempotent and quiet when everything is present. Writes only to
# stderr: `./reticle serve` runs this before exec'ing the server, whose stdout
# is the MCP protocol.
#
#   scripts/setup.sh serve   system packages for the GPU path on CPU-only machines
#   scripts/setup.sh test    + KLayout, Slurm (slurm-wlm, munge), Chromium, a Python venv with
#                            the pinned MCP SDK, pytest and Playwright, the pinned MCP
#                            Inspector CLI, and the pinned MCP conformance suite
#                            with the Node 22 it runs on
set -euo pipefail
exec 1>&2
mode="${1:-serve}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
env_dir="$root/target/test-env"

say() { echo "setup: $*"; }

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo_cmd=(sudo -n); fi
fi

apt_install() {
  local missing=()
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if ! command -v apt-get >/dev/null 2>&1; then
    say "cannot install ${missing[*]}: apt-get not found (install them by hand)"
    return 1
  fi
  say "installing ${missing[*]}"
  if ! "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1; then
    "${sudo_cmd[@]}" apt-get update -qq >/dev/null 2>&1 || true
    "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

# Vulkan loader + Mesa (lavapipe is the CPU Vulkan driver: the GPU code path
# runs everywhere, and a real GPU's driver is used where one exists).
apt_install libvulkan1 mesa-vulkan-drivers || say "continuing without Vulkan: the CPU backend will be used"

if [ "$mode" = "test" ]; then
  apt_install klayout python3-venv || true
  # The viewer's browser test (tests/python/test_viewer_browser.py) drives Debian's
  # chromium through Playwright (pinned in requirements.txt; it uses this browser, it
  # downloads none). No `|| true`: a missing browser fails that test and says why.
  apt_install chromium || say "cannot install chromium: the viewer's browser test will fail and say why"
  # The Slurm tests start a one-host cluster (deploy/slurm/dev-cluster.sh, which also
  # installs these itself when missing); no `|| true`: a missing cluster fails the tests.
  apt_install slurm-wlm munge || say "cannot install slurm-wlm and munge: the Slurm tests will fail and say why"
  if [ ! -x "$env_dir/venv/bin/python" ]; then
    say "creating the Python test venv"
    python3 -m venv "$env_dir/venv"
  fi
  req="$root/tests/python/requirements.txt"
  stamp="$env_dir/venv/.requirements.sha256"
  if [ ! -f "$stamp" ] || ! sha256sum -c --status "$stamp" 2>/dev/null; then
    say "installing pinned Python test packages"
    "$env_dir/venv/bin/pip" install -q --disable-pip-version-check -r "$req"
    sha256sum "$req" >"$stamp"
  fi
  inspector_version="$(cat "$root/tests/python/inspector.version")"
  if [ ! -f "$env_dir/node/node_modules/@modelcontextprotocol/inspector/package.json" ] ||
     ! grep -q "\"version\": \"$inspector_version\"" "$env_dir/node/node_modules/@modelcontextprotocol/inspector/package.json"; then
    if command -v npm >/dev/null 2>&1; then
      say "installing the MCP Inspector CLI $inspector_version"
      mkdir -p "$env_dir/node"
      npm install --silent --no-audit --no-fund --prefix "$env_dir/node" "@modelcontextprotocol/inspector@$inspector_version" >/dev/null
    else
      apt_install nodejs npm
      npm install --silent --no-audit --no-fund --prefix "$env_dir/node" "@modelcontextprotocol/inspector@$inspector_version" >/dev/null
    fi
  fi
  # The official MCP conformance suite and the Node 22 it needs (pinned in
  # tests/conformance/versions, one `name@version` a line).
  conf_dir="$env_dir/conformance"
  conf_pkgs=()
  conf_missing=0
  while read -r spec; do
    case "$spec" in ''|'#'*) continue ;; esac
    conf_pkgs+=("$spec")
    name="${spec%@*}"
    version="${spec##*@}"
    grep -q "\"version\": \"$version\"" "$conf_dir/node_modules/$name/package.json" 2>/dev/null || conf_missing=1
  done <"$root/tests/conformance/versions"
  if [ ! -x "$conf_dir/node_modules/.bin/node" ]; then conf_missing=1; fi
  if [ "$conf_missing" -eq 1 ]; then
    command -v npm >/dev/null 2>&1 || apt_install nodejs npm
    say "installing ${conf_pkgs[*]} (MCP conformance suite)"
    mkdir -p "$conf_dir"
    npm install --silent --no-audit --no-fund --save-exact --prefix "$conf_dir" "${conf_pkgs[@]}" >/dev/null
  fi
fi
