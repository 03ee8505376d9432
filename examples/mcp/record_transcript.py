#!/usr/bin/env python3
"""Records a JSON-RPC transcript for tests/tests/e2e/transcripts.rs.

    python3 examples/mcp/record_transcript.py SKELETON.skel > transcripts/NAME.jsonl

The skeleton is the transcript with `{"recv": null}` where an answer goes. Each
answer is recorded with volatile values masked: `"{{*}}"` for timings and pids (the
keys in VOLATILE, `serverInfo.version`, plus the skeleton's `{"comment": …, "volatile": [...]}`), ids the
server generates (`job_…`, `ses_…`) bound as `{{job_id}}` / `{{session_id}}` (later ones
`{{job_id_2}}`, …),
a JSON-rendered `content[0].text` (which repeats `structuredContent`) as `"{{*}}"`, an
`image` block's `data` and a `resource_link`'s `uri` and `name` (they name the job's
random artifact directory) as `"{{*}}"`.
Review the output before committing it: it is the expected behaviour from then on.

Environment: RETICLE_BIN (default target/release/reticle). The server runs like the
test runs it: allowed root = the repository, CPU backend, lazy workers, artifacts
in a temporary directory (`${ARTIFACTS}` in the transcript).
"""

import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
VOLATILE = {
    "age_ms", "pid", "uptime_ms", "uptime_s", "elapsed_ms", "took_ms", "duration_ms",
    "wall_ms", "createdAt", "lastUpdatedAt", "started_at", "timings",
}
# The test sets the artifact root to a temporary directory and substitutes ${ARTIFACTS}.
ARTIFACTS = tempfile.mkdtemp(prefix="reticle-transcript-")
ID_PATTERNS = [("job_id", re.compile(r"job_[0-9a-f]{32}")), ("session_id", re.compile(r"ses_[0-9a-f]{12}"))]


class Server:
    def __init__(self):
        self.dir = tempfile.TemporaryDirectory()
        env = dict(os.environ)
        env.update({
            "MCP_READY_FILE": f"{self.dir.name}/ready",
            "RETICLE_LOG_DIR": f"{self.dir.name}/logs",
            "RETICLE_ALLOWED_ROOTS": str(ROOT),
            "RETICLE_BACKEND": "cpu",
            "RETICLE_LAZY_WORKERS": "true",
            "KLAYOUT_MCP_ARTIFACT_ROOT": ARTIFACTS,
        })
        binary = os.environ.get("RETICLE_BIN", str(ROOT / "target" / "release" / "reticle"))
        self.proc = subprocess.Popen([binary, "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=env, text=True)

    def send(self, message):
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def answer(self, request_id):
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise SystemExit(f"server closed stdout before answering {request_id}")
            message = json.loads(line)
            if message.get("id") == request_id:
                return message

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


class Recorder:
    def __init__(self, volatile):
        self.volatile = VOLATILE | set(volatile)
        self.bindings = {}

    def substitute(self, value):
        if isinstance(value, str):
            value = value.replace("${REPO}", str(ROOT))
            for name, bound in self.bindings.items():
                value = value.replace("{{%s}}" % name, bound)
            return value
        if isinstance(value, list):
            return [self.substitute(v) for v in value]
        if isinstance(value, dict):
            return {k: self.substitute(v) for k, v in value.items()}
        return value

    def mask(self, value, key=None):
        if key in self.volatile:
            return "{{*}}"
        if isinstance(value, dict):
            out = {k: self.mask(v, k) for k, v in value.items()}
            if key == "serverInfo" and "version" in out:
                out["version"] = "{{*}}"  # the build's version, not behaviour
            content = value.get("content")
            if isinstance(content, list) and "structuredContent" in value:
                for item in out["content"]:
                    # An image's pixels are its file's (read back through resources/read in
                    # the SDK tests); a link names the job's random artifact directory.
                    if item.get("type") == "image":
                        item["data"] = "{{*}}"
                        item.get("_meta", {}).get("reticle/image", {})["uri"] = "{{*}}"
                    if item.get("type") == "resource_link":
                        item["uri"] = item["name"] = "{{*}}"
                for original, item in zip(content, out["content"]):
                    try:
                        if json.loads(original.get("text", "")) == value["structuredContent"]:
                            item["text"] = "{{*}}"
                    except (ValueError, TypeError):
                        pass
            return out
        if isinstance(value, list):
            return [self.mask(v) for v in value]
        if isinstance(value, str):
            for base, pattern in ID_PATTERNS:
                for found in pattern.findall(value):
                    # The first id of a kind is {{job_id}}, later ones {{job_id_2}}, …
                    name = next((n for n, b in self.bindings.items() if b == found), None)
                    if name is None:
                        taken = sum(1 for n in self.bindings if n == base or n.startswith(base + "_"))
                        name = base if taken == 0 else f"{base}_{taken + 1}"
                        self.bindings[name] = found
                    if value == found:
                        return "{{%s}}" % name
                    value = value.replace(found, "{{%s}}" % name)
            return value.replace(ARTIFACTS, "${ARTIFACTS}").replace(str(ROOT), "${REPO}")
        return value


def main(path):
    steps = [json.loads(line) for line in open(path) if line.strip()]
    volatile = next((s.get("volatile", []) for s in steps if "comment" in s), [])
    recorder = Recorder(volatile)
    server = Server()
    time.sleep(0.2)
    last = None
    out = []
    for step in steps:
        if "send" in step:
            message = recorder.substitute(step["send"])
            server.send(message)
            if "id" in message:
                last = server.answer(message["id"])
        elif "until" in step:
            until = step["until"]
            for _ in range(until.get("max", 1200)):
                request = recorder.substitute(until["send"])
                server.send(request)
                last = server.answer(request["id"])
                node = last
                for part in until["pointer"].strip("/").split("/"):
                    node = node.get(part) if isinstance(node, dict) else None
                if node in until["in"]:
                    break
                time.sleep(0.05)
        elif "recv" in step:
            step = {"recv": recorder.mask(last)}
            last = None
        elif "requires_tools" in step:
            server.send({"jsonrpc": "2.0", "id": "transcript-tools", "method": "tools/list", "params": {}})
            names = {t["name"] for t in server.answer("transcript-tools")["result"]["tools"]}
            missing = set(step["requires_tools"]) - names
            if missing:
                raise SystemExit(f"this build has no {sorted(missing)}: cannot record {path}")
        out.append(step)
    server.close()
    for step in out:
        print(json.dumps(step, ensure_ascii=False))


if __name__ == "__main__":
    main(sys.argv[1])
