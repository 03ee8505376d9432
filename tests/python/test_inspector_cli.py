"""The MCP Inspector CLI (pinned in inspector.version) lists reticle's tools."""

import json
import subprocess


def test_inspector_lists_tools(reticle_bin, inspector_cli, server_env, tmp_path):
    proc = subprocess.run(
        [inspector_cli, "--cli", reticle_bin, "serve", "--method", "tools/list"],
        capture_output=True, text=True, timeout=120, env={**server_env, "HOME": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    listing = json.loads(proc.stdout)
    names = sorted(t["name"] for t in listing["tools"])
    assert "health" in names and "telemetry" in names, names


def test_inspector_calls_health(reticle_bin, inspector_cli, server_env, tmp_path):
    proc = subprocess.run(
        [inspector_cli, "--cli", reticle_bin, "serve", "--method", "tools/call", "--tool-name", "health"],
        capture_output=True, text=True, timeout=120, env={**server_env, "HOME": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(proc.stdout)
    assert result.get("isError") in (False, None), result
    assert result["structuredContent"]["status"] == "ok"
