"""The official MCP conformance suite (@modelcontextprotocol/conformance, pinned in
tests/conformance/versions) against `reticle serve --http --anonymous`.

The suite's client sends no token, hence `--anonymous` (loopback only). Scenarios that
call fixtures reticle does not have are listed, each with its reason, in
tests/conformance/expected-failures.yml; the CLI exits non-zero on any other failure (or
warning), and on a listed scenario that passes. The transport, lifecycle and security
scenarios are asserted once more from the saved results."""

import json
import os
import re
import subprocess

import pytest

from conftest import ROOT

CONFORMANCE = ROOT / "target" / "test-env" / "conformance"
NODE = CONFORMANCE / "node_modules" / ".bin" / "node"
CLI = CONFORMANCE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
VERSIONS = ROOT / "tests" / "conformance" / "versions"
BASELINE = ROOT / "tests" / "conformance" / "expected-failures.yml"
# None of these may be in the baseline: each must pass.
MUST_PASS = ["server-initialize", "ping", "logging-set-level", "tools-list",
             "server-sse-multiple-streams", "dns-rebinding-protection"]


def pinned(name):
    for line in VERSIONS.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and line.rsplit("@", 1)[0] == name:
            return line.rsplit("@", 1)[1]
    raise AssertionError(f"{name} is not pinned in {VERSIONS}")


@pytest.fixture(scope="module")
def conformance_cli():
    """The pinned conformance CLI and the Node 22 it runs on; missing is a failure, not a skip."""
    hint = "run scripts/setup.sh test (it installs tests/conformance/versions into target/test-env/conformance)"
    if not NODE.exists():
        pytest.fail(f"Node 22 for the conformance suite is not installed at {NODE}: {hint}")
    version = subprocess.run([str(NODE), "--version"], capture_output=True, text=True, timeout=30)
    major = re.match(r"v(\d+)\.", version.stdout.strip())
    if version.returncode != 0 or not major or int(major.group(1)) < 22:
        pytest.fail(f"{NODE} is not Node >= 22 ({version.stdout.strip()} {version.stderr.strip()}): {hint}")
    package = CLI.parents[1] / "package.json"
    if not CLI.exists() or not package.exists():
        pytest.fail(f"the MCP conformance CLI is not installed at {CLI}: {hint}")
    installed = json.loads(package.read_text())["version"]
    want = pinned("@modelcontextprotocol/conformance")
    if installed != want:
        pytest.fail(f"conformance CLI {installed} installed, {want} pinned in {VERSIONS}: {hint}")
    return NODE, CLI


def test_baseline_lists_no_transport_lifecycle_or_security_scenario():
    listed = re.findall(r"^\s*-\s*([\w-]+)\s*$", BASELINE.read_text(), flags=re.M)
    assert listed, f"no scenarios parsed from {BASELINE}"
    assert not set(listed) & set(MUST_PASS), set(listed) & set(MUST_PASS)
    assert not [s for s in listed if re.search(r"initialize|ping|logging-set|sse|dns|auth|session", s)], listed


def test_conformance_suite(conformance_cli, http_server, tmp_path):
    node, cli = conformance_cli
    server = http_server(args=["--anonymous"])
    out = tmp_path / "conformance"
    env = dict(os.environ, PATH=f"{node.parent}{os.pathsep}{os.environ.get('PATH', '')}",
               HOME=str(tmp_path), NO_COLOR="1")
    proc = subprocess.run(
        [str(node), str(cli), "server", "--url", server.url,
         "--expected-failures", str(BASELINE), "-o", str(out)],
        capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path,
    )
    summary = proc.stdout[proc.stdout.find("=== SUMMARY ==="):] if "=== SUMMARY ===" in proc.stdout else proc.stdout[-6000:]
    print(summary)

    # Each scenario's checks are saved as <out>/server-<scenario>-<timestamp>/checks.json.
    results = {}
    for checks in out.glob("server-*/checks.json"):
        scenario = re.sub(r"^server-|-\d{4}-\d\d-\d\dT[\d-]+Z$", "", checks.parent.name)
        results[scenario] = json.loads(checks.read_text())
    problems = []
    for scenario in MUST_PASS:
        checks = results.get(scenario)
        if not checks:
            problems.append(f"{scenario}: no results saved in {out}")
            continue
        bad = [c for c in checks if c["status"] not in ("SUCCESS", "INFO")]
        if bad or not any(c["status"] == "SUCCESS" for c in checks):
            problems.append(f"{scenario}: " + json.dumps(bad or checks, indent=1)[:3000])
    assert proc.returncode == 0, (
        f"conformance exited {proc.returncode}\n{summary}\n{proc.stderr[-3000:]}\n" + "\n".join(problems))
    assert not problems, "\n".join(problems)
