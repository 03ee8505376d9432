"""Operations under a real client (issue 6): blue/green worker rollout, a failed rollout,
host self-reexec, and recounting telemetry from the JSONL event log after worker crashes.

The client is the official Python MCP SDK over stdio; the operator is `reticle ctl`, run
as a separate process against the host's control socket, as an operator would.
"""

import json
import os
import shutil
import signal
import stat
import subprocess
from pathlib import Path

import anyio
import pytest
from mcp import Client

from conftest import LAYOUT, ROOT, params


pytestmark = pytest.mark.anyio


def ctl(reticle_bin, env, *args, timeout=180):
    """`reticle ctl ARGS` as a separate process; returns (exit code, stdout, stderr)."""
    done = subprocess.run(
        [reticle_bin, "ctl", *args], env=env, capture_output=True, text=True, timeout=timeout
    )
    return done.returncode, done.stdout, done.stderr


async def ctl_async(reticle_bin, env, *args):
    return await anyio.to_thread.run_sync(lambda: ctl(reticle_bin, env, *args))


async def health(client):
    result = await client.call_tool("health", {"render": "json"})
    assert not result.is_error, result
    return result.structured_content


async def ready_health(client):
    """Health once the worker pool has started (it starts in the background)."""
    while True:
        payload = await health(client)
        pool = payload["workers"]
        if pool and all(w["state"] in ("idle", "busy") for w in pool["workers"]):
            return payload
        await anyio.sleep(0.05)


class Stream:
    """A steady stream of calls from two concurrent lanes: `simulate` that waits on its
    job (so calls are in flight across rollouts and reexecs) and cheap `health` calls.
    Every answer is recorded; the tests require all of them to be successes."""

    def __init__(self, client):
        self.client = client
        self.results = []
        self.stop = anyio.Event()

    async def simulate_lane(self):
        while not self.stop.is_set():
            result = await self.client.call_tool(
                "simulate", {"layout": str(LAYOUT), "wait": True, "render": "json"}
            )
            self.results.append(("simulate", result))

    async def health_lane(self):
        while not self.stop.is_set():
            result = await self.client.call_tool("health", {"render": "json"})
            self.results.append(("health", result))
            await anyio.sleep(0.05)

    def failures(self):
        return [(name, r) for name, r in self.results if r.is_error]

    def count(self, name):
        return sum(1 for n, _ in self.results if n == name)


async def run_with_stream(client, action, settle=1.0):
    """Runs `action()` while the stream flows; returns (stream, action's result)."""
    stream = Stream(client)
    outcome = {}
    async with anyio.create_task_group() as tg:
        tg.start_soon(stream.simulate_lane)
        tg.start_soon(stream.health_lane)
        await anyio.sleep(settle)
        outcome["value"] = await action()
        await anyio.sleep(settle)
        stream.stop.set()
    return stream, outcome["value"]


def green_copy(tmp_path, reticle_bin):
    green = tmp_path / "reticle-worker-green"
    shutil.copy(Path(reticle_bin).parent / "reticle-worker", green)
    return green


async def test_rollout_under_load_fails_no_request(reticle_bin, server_env, tmp_path):
    server_env["RETICLE_WORKERS"] = "2"
    green = green_copy(tmp_path, reticle_bin)
    with anyio.fail_after(240):
        async with Client(params(reticle_bin, server_env), mode="legacy") as client:
            before = await ready_health(client)
            blue_exe = before["workers"]["workers"][0]["exe"]
            assert blue_exe != str(green)

            async def rollout():
                return await ctl_async(reticle_bin, server_env, "rollout", "--worker-bin", str(green))

            stream, (code, out, err) = await run_with_stream(client, rollout)
            assert code == 0, (out, err)
            assert json.loads(out)["rollout"]["ok"] is True
            assert stream.failures() == [], stream.failures()
            assert stream.count("simulate") >= 2, "the stream must cover the rollout"

            after = await health(client)
            workers = after["workers"]["workers"]
            assert len(workers) == 2, workers
            assert {w["exe"] for w in workers} == {str(green)}
            assert all(w["mode"] == "active" and w["release"] == 1 for w in workers)
            assert after["workers"]["rollout"]["state"] == "stable"
            assert after["workers"]["rollout"]["previous_exe"] == blue_exe
            assert after["host"]["rollout"] == "stable"

            # Rolling back is the same dance towards the previous binary.
            code, out, err = await ctl_async(reticle_bin, server_env, "rollback")
            assert code == 0, (out, err)
            back = await health(client)
            assert {w["exe"] for w in back["workers"]["workers"]} == {blue_exe}
            result = await client.call_tool("simulate", {"layout": str(LAYOUT), "wait": True})
            assert not result.is_error, result


async def test_failed_rollout_keeps_blue_and_reports_a_rollout_fault(
    reticle_bin, server_env, tmp_path
):
    broken = tmp_path / "broken-worker"
    broken.write_text("#!/bin/sh\nexit 3\n")
    broken.chmod(broken.stat().st_mode | stat.S_IXUSR)
    with anyio.fail_after(180):
        async with Client(params(reticle_bin, server_env), mode="legacy") as client:
            before = await ready_health(client)
            blue = {(w["exe"], w["pid"]) for w in before["workers"]["workers"]}

            async def rollout():
                return await ctl_async(reticle_bin, server_env, "rollout", "--worker-bin", str(broken))

            stream, (code, out, err) = await run_with_stream(client, rollout)
            assert code == 1, (out, err)
            assert "still serving the previous workers" in err, err
            assert stream.failures() == [], stream.failures()

            after = await health(client)
            assert {(w["exe"], w["pid"]) for w in after["workers"]["workers"]} == blue
            last = after["workers"]["rollout"]["last"]
            assert last["ok"] is False and last["exe"] == str(broken), last
            fault = after["host"]["last_fault"]
            assert fault["class"] == "rollout" and fault["code"] == "rollout_failed", fault
            assert after["status"] == "degraded"
            code, out, _ = ctl(reticle_bin, server_env, "health")
            assert code == 0 and "last rollout: FAILED" in out, out


async def test_reexec_keeps_the_session_and_the_pid(reticle_bin, server_env):
    with anyio.fail_after(240):
        async with Client(params(reticle_bin, server_env), mode="legacy") as client:
            before = await ready_health(client)
            pid = before["server"]["pid"]
            assert before["server"]["reexecs"] == 0
            # Violation ids of this session (seed 000 §5): optimize by id alone must still
            # work after the handover.
            evaluated = await client.call_tool("evaluate", {
                "layout": str(LAYOUT), "deck": "iccad13_m1", "pixel_nm": 8,
                "report_level": "detailed", "wait": True, "render": "json"})
            assert not evaluated.is_error, evaluated
            violation_id = evaluated.structured_content["violations"][0]["violation_id"]
            # A job that outlives the handover: the new image must finish it under its id.
            started = await client.call_tool("simulate", {"layout": str(LAYOUT)})
            job_id = started.structured_content["job_id"]

            async def reexec():
                return await ctl_async(reticle_bin, server_env, "reexec")

            stream, (code, out, err) = await run_with_stream(client, reexec)
            assert code == 0, (out, err)
            assert f"pid {pid}" in out, out
            assert stream.failures() == [], stream.failures()
            assert stream.count("simulate") >= 2 and stream.count("health") >= 4

            # The same SDK session goes on: no new initialize, same pid, one reexec.
            after = await health(client)
            assert after["server"]["pid"] == pid
            assert after["server"]["reexecs"] == 1
            assert after["host"]["uptime_ms"] >= before["host"]["uptime_ms"]
            while True:
                polled = await client.call_tool("poll", {"job_id": job_id, "render": "json"})
                assert not polled.is_error, polled
                if polled.structured_content["status"] not in ("queued", "running"):
                    break
                await anyio.sleep(0.1)
            assert polled.structured_content["status"] == "completed", polled.structured_content
            optimized = await client.call_tool("optimize", {
                "violation_id": violation_id, "iterations": 2, "refine_iterations": 0,
                "wait": True, "render": "json"})
            assert not optimized.is_error, optimized
            assert optimized.structured_content["target"]["resolved_from"] == "session_cache"
            # Counters continued rather than restarting from zero.
            telemetry = (await client.call_tool("telemetry", {"render": "json"})).structured_content
            totals = telemetry["totals"]
            assert totals["requests"] > stream.count("simulate") + stream.count("health")
            # A call handed over is counted once, with the outcome the new image gave it:
            # nothing failed, and every request is a success, an error or in flight.
            assert totals["errors"] == 0, totals
            assert totals["requests"] == totals["successes"] + totals["in_flight"], totals
            code, out, _ = ctl(reticle_bin, server_env, "events", "--since", "seq:0")
            records = [json.loads(line) for line in out.splitlines()]
            handover = [r for r in records if r["event"] == "reexec"]
            assert [r["step"] for r in handover] == ["exec", "restored"], handover
            # The handover really carried work in flight: at least the job started
            # above, and usually a waiting simulate call of the stream.
            assert handover[0]["jobs"] >= 1, handover[0]
            print("handover:", handover[0])


def read_events(reticle_bin, env):
    """The event log, through `reticle ctl events` (one JSON record per line)."""
    code, out, err = ctl(reticle_bin, env, "events", "--since", "seq:0")
    assert code == 0, err
    return [json.loads(line) for line in out.splitlines()]


async def test_event_log_recounts_telemetry_after_worker_crashes(reticle_bin, server_env):
    kills = 0
    replayed = 0  # attempts beyond the first, summed over the jobs
    with anyio.fail_after(240):
        async with Client(params(reticle_bin, server_env), mode="legacy") as client:
            for _ in range(3):
                started = await client.call_tool("simulate", {"layout": str(LAYOUT)})
                job_id = started.structured_content["job_id"]
                # Kill the worker while the job runs on it; the job is replayed.
                while True:
                    workers = (await health(client))["workers"]["workers"]
                    busy = [w for w in workers if w["current_job"]]
                    if busy:
                        os.kill(busy[0]["pid"], signal.SIGKILL)
                        kills += 1
                        break
                    polled = await client.call_tool("poll", {"job_id": job_id, "render": "json"})
                    if polled.structured_content["status"] not in ("queued", "running"):
                        break
                    await anyio.sleep(0.02)
                while True:
                    polled = await client.call_tool("poll", {"job_id": job_id, "render": "json"})
                    if polled.structured_content["status"] not in ("queued", "running"):
                        break
                    await anyio.sleep(0.1)
                assert polled.structured_content["status"] == "completed"
                # A kill that lands after the worker sent its answer (health still showed
                # the job) replays nothing: the job's own attempt count says which did.
                replayed += polled.structured_content["attempts"] - 1
            # Errors too: a typo'd argument and an unknown job.
            assert (await client.call_tool("health", {"detial": "full"})).is_error
            assert (await client.call_tool("poll", {"job_id": "job_nope"})).is_error
            telemetry = (await client.call_tool("telemetry", {"render": "json"})).structured_content

    assert kills >= 1, "no job was caught running on a worker"
    upto = telemetry["events"]["seq"]
    records = [r for r in read_events(reticle_bin, server_env) if r["seq"] <= upto]
    seqs = [r["seq"] for r in records]
    assert seqs == list(range(1, upto + 1)), "the log must be gap-free"
    requests = [r for r in records if r["event"] == "request"]
    totals = telemetry["totals"]
    # The telemetry call itself was in flight when it counted, so it is not in the log yet.
    assert totals["requests"] == len(requests) + totals["in_flight"], (totals, len(requests))
    assert totals["successes"] == sum(r["outcome"] == "ok" for r in requests)
    assert totals["errors"] == sum(r["outcome"] == "error" for r in requests) >= 2
    restarts = [r for r in records if r["event"] == "worker.restart"]
    faults = [r for r in records if r["event"] == "worker.fault"]
    assert totals["restarts"] == len(restarts) >= kills, (totals, len(restarts), kills)
    assert len(faults) >= kills and all(f["class"] == "process" for f in faults)
    replays = [r for r in records if r["event"] == "job" and r["transition"] == "replay"]
    assert totals["retries"] == len(replays) == replayed, (totals, len(replays), replayed)
    assert 1 <= replayed <= kills, ("no kill landed while a job ran", replayed, kills)
    # Per-method aggregates agree with the log too.
    by_method = {m["method"]: m for m in telemetry["methods"]}
    polls = [r for r in requests if r["method"] == "tools/call:poll"]
    assert by_method["tools/call:poll"]["count"] == len(polls)
    assert by_method["tools/call:poll"]["p95_ms"] is not None


async def test_the_deploy_script_rolls_out_workers_and_host_under_load(
    reticle_bin, server_env, tmp_path
):
    """deploy/rollout.sh as an operator runs it: worker blue/green, then host reexec."""
    build = tmp_path / "build"
    build.mkdir()
    for name in ("reticle", "reticle-worker"):
        shutil.copy(Path(reticle_bin).parent / name, build / name)
    server_env["RETICLE_RELEASES_DIR"] = str(tmp_path / "releases")
    with anyio.fail_after(240):
        async with Client(params(reticle_bin, server_env), mode="legacy") as client:
            before = await ready_health(client)

            def deploy():
                done = subprocess.run(
                    [str(ROOT / "deploy" / "rollout.sh"), "--from", str(build)],
                    env=server_env, capture_output=True, text=True, timeout=180,
                )
                return done.returncode, done.stdout, done.stderr

            async def rollout():
                return await anyio.to_thread.run_sync(deploy)

            stream, (code, out, err) = await run_with_stream(client, rollout)
            assert code == 0, (out, err)
            assert stream.failures() == [], stream.failures()
            after = await health(client)
            assert after["server"]["pid"] == before["server"]["pid"]
            assert after["server"]["reexecs"] == 1
            releases = str(tmp_path / "releases")
            assert all(w["exe"].startswith(releases) for w in after["workers"]["workers"])
            assert "ok: state=" in out, out
