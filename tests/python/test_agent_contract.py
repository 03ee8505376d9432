"""Issue 20: the agent contract as the seeds state it, through the official Python SDK.

One test (or a few) per item of the issue: G2 after a disconnect, `null` as "use the
default", detail and bounded porcelain, finished-payload output schemas, seed 000 §2/§3
fields, `state_after`, bounded lists, SIGTERM with work in flight, replay of layout ops.
"""

import json
import os
import pathlib
import signal
import subprocess
import time

import anyio
import pytest
from mcp import Client, StdioServerParameters

from conftest import ROOT

LAYOUT = ROOT / "fixtures" / "layouts" / "lines_and_pad.glp"

pytestmark = pytest.mark.anyio


@pytest.fixture()
def anyio_backend():
    return "asyncio"


def params(reticle_bin, env):
    return StdioServerParameters(command=reticle_bin, args=["serve"], env=env)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); its state in /proc says it is dead.
    try:
        state = pathlib.Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def events(log_dir: pathlib.Path) -> list[dict]:
    records = []
    for path in sorted(log_dir.glob("events*.jsonl")):
        for line in path.read_text().splitlines():
            if line.strip():
                records.append(json.loads(line))
    return sorted(records, key=lambda r: r["seq"])


async def busy_worker_pid(client) -> int:
    for _ in range(600):
        health = await client.call_tool("health", {"render": "json"})
        for worker in health.structured_content["workers"]["workers"]:
            if worker["state"] == "busy":
                return worker["pid"]
        await anyio.sleep(0.01)
    raise AssertionError("no worker became busy")


# ---------------------------------------------------------------------------------------
# Item 4: G2 after a disconnect.


async def test_g2_a_polled_job_is_cancelled_and_its_worker_killed_when_the_client_goes_away(
    reticle_bin, server_env
):
    log_dir = pathlib.Path(server_env["RETICLE_LOG_DIR"])
    with anyio.fail_after(120):
        async with Client(params(reticle_bin, server_env), mode="auto") as client:
            # 4096×4096 pixels: seconds of work, far longer than this test waits.
            started = await client.call_tool("simulate", {"layout": str(LAYOUT), "pixel_nm": 0.5})
            assert not started.is_error, started
            job_id = started.structured_content["job_id"]
            polled = await client.call_tool("poll", {"job_id": job_id, "render": "json"})
            assert polled.structured_content["status"] in ("queued", "running"), polled
            pid = await busy_worker_pid(client)
            disconnected = time.monotonic()
        # The SDK closed the host's stdin: that is the disconnect.
        while alive(pid) and time.monotonic() - disconnected < 2.0:
            await anyio.sleep(0.01)
        took = time.monotonic() - disconnected
        assert not alive(pid), f"worker {pid} still alive {took:.2f} s after the disconnect"
        assert took < 2.0, took
    records = events(log_dir)
    transitions = [r for r in records if r["event"] == "job" and r["job_id"] == job_id]
    assert transitions[-1]["status"] == "cancelled", transitions
    assert transitions[-1]["transition"] == "cancelled", transitions
    assert "disconnected" in transitions[-1]["cancel_reason"], transitions
    assert not any(t["status"] == "completed" for t in transitions), transitions
    ends = [r for r in records if r["event"] == "session.end"]
    assert ends and ends[-1]["cancelled_jobs"] == [job_id], ends
    # `reticle ctl telemetry` reads back the stopped host's last telemetry.
    ctl = subprocess.run(
        [reticle_bin, "ctl", "telemetry", "--json", "--log-dir", str(log_dir)],
        env=server_env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert ctl.returncode == 0, ctl.stderr
    telemetry = json.loads(ctl.stdout)
    assert telemetry["jobs"]["cancelled"] == 1, telemetry["jobs"]
    assert telemetry["jobs"]["completed"] == 0, telemetry["jobs"]
    assert telemetry["jobs"]["by_status"].get("running", 0) == 0, telemetry["jobs"]
