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

from conftest import LAYOUT, ROOT, params
from layouts import gcd_path


pytestmark = pytest.mark.anyio


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
    gcd = gcd_path()
    server_env["RETICLE_ALLOWED_ROOTS"] += os.pathsep + str(gcd.parent)
    with anyio.fail_after(120):
        async with Client(params(reticle_bin, server_env), mode="auto") as client:
            # The whole gcd_45nm at 1 nm, 675 tiles: many seconds of work on any machine,
            # far longer than this test waits (a 0.5 nm simulate of the clip now ends in
            # 0.6 s, sometimes before the first health call saw its worker busy).
            started = await client.call_tool(
                "evaluate", {"layout": str(gcd), "deck": "nangate45_m1v1", "layer": "11/0"})
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


# ---------------------------------------------------------------------------------------
# Item 1: `null` means "use the default" (seed 002).


def optional_properties(schema: dict, path: str = ""):
    """(path, property schema) of every optional property, at every depth."""
    required = set(schema.get("required", []))
    if isinstance(schema.get("items"), dict):
        yield from optional_properties(schema["items"], f"{path}/items")
    for name, prop in schema.get("properties", {}).items():
        if name not in required:
            yield f"{path}/{name}", prop
        yield from optional_properties(prop, f"{path}/{name}")


def admits_null(prop: dict) -> bool:
    types = prop.get("type")
    if types == "null" or (isinstance(types, list) and "null" in types):
        return "enum" not in prop or None in prop["enum"]
    if "enum" in prop:
        return None in prop["enum"]
    return any(admits_null(p) for p in prop.get("anyOf", []))


async def test_null_is_the_default_for_every_optional_field_and_the_schemas_say_so(reticle_bin, server_env):
    with anyio.fail_after(120):
        async with Client(params(reticle_bin, server_env), mode="auto") as client:
            tools = (await client.list_tools()).tools
            checked = 0
            for tool in tools:
                assert "null" in tool.input_schema["description"], tool.name
                for path, prop in optional_properties(tool.input_schema):
                    assert admits_null(prop), f"{tool.name}{path} does not admit null: {prop}"
                    checked += 1
            assert checked > 50, checked
            # Every tool that can be called without arguments accepts all its optional
            # fields as null, and answers as it does without them.
            for tool in tools:
                if tool.input_schema.get("required") or tool.name in ("health", "telemetry"):
                    continue
                nulls = {name: None for name in tool.input_schema.get("properties", {})}
                with_nulls = await client.call_tool(tool.name, nulls)
                bare = await client.call_tool(tool.name, {})
                assert with_nulls.is_error == bare.is_error, (tool.name, with_nulls.content[0].text)
                if with_nulls.is_error:
                    # The same (semantic) answer as without the fields, never a schema one.
                    error = with_nulls.structured_content["error"]
                    assert error == bare.structured_content["error"], tool.name
                    assert "errors" not in (error.get("details") or {}), (tool.name, error)
                checked_calls = True
            health = await client.call_tool("health", {"render": None, "detail": None})
            assert not health.is_error and health.structured_content["status"] == "ok"
            # The case: evaluate with "cell": null and every other optional null.
            args = {"layout": str(LAYOUT), "deck": "iccad13_m1"}
            spec = next(t for t in tools if t.name == "evaluate").input_schema
            nulls = {name: None for name in spec["properties"] if name not in args}
            plain = await client.call_tool("evaluate", {**args, "report_level": "detailed", "wait": True})
            nulled = await client.call_tool(
                "evaluate", {**nulls, **args, "report_level": "detailed", "wait": True, "limits": {"max_violations": None}}
            )
            assert not nulled.is_error, nulled.content[0].text
            a, b = plain.structured_content, nulled.structured_content
            assert a["counts"] == b["counts"] and a["metrics"] == b["metrics"]
            assert [v["violation_id"] for v in a["violations"]] == [v["violation_id"] for v in b["violations"]]
            # No default for a required field: null stays an error, and so does an unknown one.
            required_null = await client.call_tool("evaluate", {**args, "layout": None})
            assert required_null.is_error
            assert required_null.structured_content["error"]["code"] == "INVALID_INPUT"
            # Inside a list's objects too.
            sid = (await client.call_tool("open_layout", {"path": str(DEMO_GDS), "render": "json"})).structured_content["session_id"]
            box = {"left": -1.0, "bottom": -1.0, "right": 41.0, "top": 1.0}
            layer = {"layer": 1, "datatype": 0}
            plain = await client.call_tool("query_region", {"session_id": sid, "box": box, "layers": [layer], "render": "json"})
            nulled = await client.call_tool("query_region", {
                "session_id": sid, "box": box, "layers": [{**layer, "name": None}], "max_shapes": None,
                "hierarchy_mode": None, "render": "json"})
            assert not nulled.is_error, nulled.content[0].text
            assert nulled.structured_content["shapes"] == plain.structured_content["shapes"]
            typo = await client.call_tool("evaluate", {**args, "cel": None})
            assert typo.is_error and "cel" in json.dumps(typo.structured_content["error"]["details"])


# ---------------------------------------------------------------------------------------
# Item 2: detail is honoured everywhere.


async def test_detail_concise_is_a_bounded_summary_in_both_renderings(reticle_bin, server_env):
    with anyio.fail_after(120):
        async with Client(params(reticle_bin, server_env), mode="auto") as client:
            args = {"layout": str(LAYOUT), "deck": "iccad13_m1", "report_level": "detailed", "wait": True}
            texts = {}
            for render in ("json", "porcelain"):
                for detail in ("concise", "full"):
                    result = await client.call_tool("evaluate", {**args, "render": render, "detail": detail})
                    assert not result.is_error, result.content[0].text
                    texts[render, detail] = (result.content[0].text, result.structured_content)
            full_text, payload = texts["json", "full"]
            assert json.loads(full_text) == payload
            assert len(payload["violations"]) > 3, "the fixture should report a few violations"
            concise_text, concise_payload = texts["json", "concise"]
            # structuredContent stays the whole payload (another job: ids and timings differ).
            assert concise_payload["counts"] == payload["counts"]
            assert len(concise_payload["violations"]) == len(payload["violations"])
            assert len(concise_text) <= 4096 < len(full_text), (len(concise_text), len(full_text))
            summary = json.loads(concise_text)
            assert summary["metrics"] == payload["metrics"]
            for key, value in payload["counts"].items():
                if not isinstance(value, list):
                    assert summary["counts"][key] == value, key
            assert summary["schema_version"] == payload["schema_version"]
            assert summary["omitted"]["/violations"].endswith(f"of {len(payload['violations'])} items shown")
            assert "detail=full" in summary["more"]
            porcelain_concise = texts["porcelain", "concise"][0].splitlines()
            porcelain_full = texts["porcelain", "full"][0].splitlines()
            assert len(porcelain_concise) <= 60
            canonical = [v for v in payload["violations"] if v["dedup_strategy"] == "canonical"]
            listed = [line for line in porcelain_full if line.startswith("  ") and " at [" in line]
            assert len(listed) == len(canonical)
            listed_concise = [line for line in porcelain_concise if line.startswith("  ") and " at [" in line]
            assert len(listed_concise) == min(10, len(canonical))
            if len(canonical) > 10:
                assert any(f"{len(canonical) - 10} more canonical" in line for line in porcelain_concise)
            # A tool without a bespoke renderer: concise JSON is a summary too.
            tel_full = await client.call_tool("telemetry", {"render": "json", "detail": "full"})
            tel_concise = await client.call_tool("telemetry", {"render": "json", "detail": "concise"})
            assert len(tel_concise.content[0].text) <= 4096
            assert json.loads(tel_full.content[0].text) == tel_full.structured_content


# ---------------------------------------------------------------------------------------
# Item 3: output schemas describe the finished payload, and every answer matches.


async def test_job_tool_output_schemas_describe_the_finished_payload(reticle_bin, server_env):
    import jsonschema

    with anyio.fail_after(180):
        async with Client(params(reticle_bin, server_env), mode="auto") as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            for name in ("evaluate", "simulate", "optimize"):
                schema = tools[name].output_schema
                result = schema["$defs"]["result"]
                # One shape, or a choice of shapes (optimize: one window's or a region's).
                shapes = [
                    schema["$defs"][choice["$ref"].rsplit("/", 1)[1]]
                    for choice in result.get("anyOf", [])
                ] or [result]
                for shape in shapes:
                    for field in shape["required"]:
                        assert field in schema["properties"], f"{name}: {field} not at the top level"
            schema = tools["evaluate"].output_schema

            def check(instance, ref):
                jsonschema.validate(instance, {"$defs": schema["$defs"], "$ref": f"#/$defs/{ref}"})

            args = {"layout": str(LAYOUT), "deck": "iccad13_m1", "report_level": "detailed"}
            waited = await client.call_tool("evaluate", {**args, "wait": True, "render": "json"})
            check(waited.structured_content, "finished")
            assert waited.structured_content["status"] == "completed"
            started = await client.call_tool("evaluate", {**args, "render": "json"})
            check(started.structured_content, "job_started")
            job_id = started.structured_content["job_id"]
            while True:
                polled = await client.call_tool("poll", {"job_id": job_id, "render": "json"})
                if polled.structured_content["status"] not in ("queued", "running"):
                    break
                await anyio.sleep(0.05)
            check(polled.structured_content["result"], "result")
            # A finished payload that lost a required field does not pass the schema.
            broken = dict(waited.structured_content)
            del broken["counts"]
            with pytest.raises(jsonschema.ValidationError):
                check(broken, "finished")


# ---------------------------------------------------------------------------------------
# Item 5: seed 000 §2/§3 fields as the seed defines them.


def seed_group_id(record: dict) -> str:
    """Seed 000 §2b's recipe, from the record's own fields (the bytes D23/D74 document)."""
    import hashlib
    import struct

    p = record["dedup_provenance"]
    x_nm, y_nm = p["canonical_location_nm"]
    data = (
        p["rule_deck_hash"].encode()
        + b"\0"
        + struct.pack("<dqq", p["radius_nm"], round(x_nm * 1000), round(y_nm * 1000))
        + record["rule_id"].encode()
        + b"\0"
        + record["layer"].encode()
    )
    return hashlib.blake2b(data).hexdigest()[:16]


async def test_seed_000_fields_group_ids_metric_names_and_the_capability_matrix(
    reticle_bin, server_env, tmp_path
):
    deck = tmp_path / "printed_enclosure_only.json"
    deck.write_text(json.dumps({
        "name": "printed-enclosure-only", "version": "1.0.0",
        "layers": {"M1": "1/0", "M2": "2/0"},
        "defaults": {"severity": "error", "applies_to": "printed", "dedup_radius_nm": 0},
        "rules": [{"id": "M1.EN.M2", "kind": "enclosure", "layer": "M1", "other_layer": "M2", "value": 5}],
    }))
    server_env["RETICLE_ALLOWED_ROOTS"] += f":{tmp_path}"
    with anyio.fail_after(180):
        async with Client(params(reticle_bin, server_env), mode="auto") as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            caps = tools["evaluate"].meta["capabilities"]
            matrix = caps["engine_paths"]
            assert set(caps["detailed_values"]) == {"single_pass", "rerun_required", "conditional", "unsupported"}
            values = {entry["detailed"] for entry in matrix.values()}
            assert {"conditional", "unsupported"} <= values, matrix
            for name, entry in matrix.items():
                assert entry["detailed"] in caps["detailed_values"], name
                if entry["detailed"] == "conditional":
                    assert entry["precondition"]["signaled_via"], name
            emitted = set()
            runs = [
                {"layout": str(LAYOUT), "deck": "iccad13_m1"},
                {"layout": str(ROOT / "fixtures/layouts/acceptance_100x4tiles.gds"),
                 "deck": str(ROOT / "fixtures/decks/acceptance_width.json"), "pixel_nm": 8},
                {"layout": str(LAYOUT), "deck": str(deck), "layer": "1/0", "pixel_nm": 8},
            ]
            reports = []
            for args in runs:
                result = await client.call_tool("evaluate", {**args, "wait": True, "render": "json"})
                assert not result.is_error, result.content[0].text
                reports.append(result.structured_content)
                emitted |= {rule["engine_path"] for rule in result.structured_content["counts"]["by_rule"]}
            assert emitted - set(matrix) == set(), f"engine paths outside the matrix: {emitted - set(matrix)}"
            assert "enclosure.printed" in emitted and len(emitted) >= 4, emitted
            # The seed's metric names, beside the nested ones.
            metrics = reports[0]["metrics"]
            assert metrics["epe_mean_nm"] == metrics["epe"]["mean_abs_nm"] and metrics["epe_mean_nm"] > 0
            assert metrics["epe_max_nm"] == metrics["epe"]["max_abs_nm"] and metrics["epe_max_nm"] > 0
            # Group ids re-derive from each record's own fields with the seed's recipe.
            for args in runs[:2]:
                detailed = await client.call_tool(
                    "evaluate", {**args, "report_level": "detailed", "wait": True, "render": "json"}
                )
                records = detailed.structured_content["violations"]
                assert len(records) > 3
                for record in records:
                    assert record["violation_group_id"] == seed_group_id(record), record["violation_id"]
            # Detailed where the matrix says unsupported (every rule on such a path).
            unsupported = await client.call_tool(
                "evaluate", {**runs[2], "report_level": "detailed", "wait": True, "render": "json"}
            )
            assert unsupported.is_error, unsupported.content[0].text
            error = unsupported.structured_content["error"]
            assert error["code"] == "REPORT_LEVEL_UNSUPPORTED", error
            assert error["details"]["rules"] == [{"rule_id": "M1.EN.M2", "engine_path": "enclosure.printed"}]
            assert matrix["enclosure.printed"]["detailed"] == "unsupported"


# ---------------------------------------------------------------------------------------
# Item 6: state_after on every tool that changes state (seed 002).

DEMO_GDS = ROOT / "fixtures" / "layouts" / "observer_demo.gds"
DRC_DECK = ROOT / "fixtures" / "decks" / "width_space.drc"


async def test_state_after_on_every_state_changing_tool(reticle_bin, server_env):
    gcd = gcd_path()
    server_env["RETICLE_ALLOWED_ROOTS"] += os.pathsep + str(gcd.parent)
    with anyio.fail_after(120):
        async with Client(params(reticle_bin, server_env), mode="auto") as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            for name in ("set_view", "close_session", "cancel", "run_drc_script", "optimize"):
                schema = tools[name].output_schema
                if name != "optimize":
                    assert "state_after" in schema["required"], name
                else:
                    # One window's result or a region's (D170): each requires state_after.
                    for alt in schema["$defs"]["result"]["anyOf"]:
                        shape = schema["$defs"][alt["$ref"].rsplit("/", 1)[1]]
                        assert "state_after" in shape["required"], (name, alt)

            async def call(name, args):
                result = await client.call_tool(name, {**args, "render": "json"})
                assert not result.is_error, (name, result.content[0].text)
                return result.structured_content

            sid = (await call("open_layout", {"path": str(DEMO_GDS)}))["session_id"]
            view = await call("set_view", {"session_id": sid, "box": {"left": 0.0, "bottom": -5.0, "right": 40.0, "top": 5.0}})
            state = view["state_after"]
            assert state["open"] is True and state["session_id"] == sid
            assert state["view"] == view["view"] and state["live_sessions"] == 1
            assert state["drc_runs"] == []
            run = await call("run_drc_script", {"session_id": sid, "script_path": str(DRC_DECK)})
            assert run["state_after"]["drc_runs"] == [run["run_id"]], run["state_after"]
            assert run["state_after"]["view"] == view["view"]
            closed = await call("close_session", {"session_id": sid})
            assert closed["closed"] is True
            assert closed["state_after"] == {"session_id": sid, "open": False, "live_sessions": 0}
            # cancel: the job and the table after the call.
            # The whole gcd_45nm at 1 nm (675 tiles), as the G2 test polls: a 0.5 nm
            # simulate of the clip completed before the cancel arrived in a CI run.
            started = await call(
                "evaluate", {"layout": str(gcd), "deck": "nangate45_m1v1", "layer": "11/0"})
            cancelled = await call("cancel", {"job_id": started["job_id"]})
            after = cancelled["state_after"]
            assert after["job_id"] == started["job_id"] and after["status"] == "cancelled"
            assert after["cancel_reason"] == "cancel tool"
            assert after["jobs_by_status"].get("cancelled") == 1, after
            assert after["jobs_by_status"].get("running", 0) == 0, after


# ---------------------------------------------------------------------------------------
# Item 8: bounded lists everywhere (seed 003).


async def test_list_cells_and_list_layers_are_bounded_with_truncation_metadata(reticle_bin, server_env):
    with anyio.fail_after(120):
        async with Client(params(reticle_bin, server_env), mode="auto") as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert "max_cells" in tools["list_cells"].input_schema["properties"]
            assert "max_layers" in tools["list_layers"].input_schema["properties"]

            async def call(name, args):
                return await client.call_tool(name, {**args, "render": "json"})

            sid = (await call("open_layout", {"path": str(DEMO_GDS)})).structured_content["session_id"]
            for tool, what in (("list_cells", "cells"), ("list_layers", "layers")):
                whole = (await call(tool, {"session_id": sid})).structured_content
                total = len(whole[what])
                assert total >= 2, whole
                assert whole["truncation"] == {
                    f"{what}_dropped": 0, "truncated": False, "returned": total, "total": total, f"max_{what}": 1000,
                }
                cut = (await call(tool, {"session_id": sid, f"max_{what}": 1})).structured_content
                assert cut[what] == whole[what][:1]
                assert cut["truncation"][f"{what}_dropped"] == total - 1
                assert cut["truncation"]["truncated"] is True and cut["truncation"]["returned"] == 1
                over = await call(tool, {"session_id": sid, f"max_{what}": 10_001})
                assert over.is_error
                assert over.structured_content["error"]["code"] == "TOOL_LIMIT_EXCEEDED", over.structured_content


# ---------------------------------------------------------------------------------------
# Item 9: SIGTERM with work in flight (seed 001: finish the in-flight request, then exit).


async def test_sigterm_while_a_request_runs_answers_it_then_exits_zero(reticle_bin, server_env, tmp_path):
    status_file = tmp_path / "exit_status"
    # A shell in front of the host records its exit status (the SDK keeps the process).
    wrapper = StdioServerParameters(
        command="/bin/sh",
        args=["-c", f'"{reticle_bin}" serve; echo $? > "{status_file}"'],
        env=server_env,
    )
    with anyio.fail_after(120):
        async with Client(wrapper, mode="auto") as client:
            health = await client.call_tool("health", {"render": "json"})
            host_pid = health.structured_content["server"]["pid"]
            answer = {}

            async def long_call():
                # 4096×4096 pixels, waited: seconds of work in one request.
                answer["result"] = await client.call_tool(
                    "simulate", {"layout": str(LAYOUT), "pixel_nm": 0.5, "wait": True, "render": "json"}
                )

            async with anyio.create_task_group() as group:
                group.start_soon(long_call)
                await busy_worker_pid(client)
                signalled = time.monotonic()
                os.kill(host_pid, signal.SIGTERM)
            took = time.monotonic() - signalled
            result = answer["result"]
            assert not result.is_error, result.content[0].text
            assert result.structured_content["status"] == "completed", result.structured_content
            assert result.structured_content["grid"], result.structured_content
            # The host exits once the request is answered.
            deadline = time.monotonic() + 10
            while not status_file.exists() and time.monotonic() < deadline:
                await anyio.sleep(0.02)
            assert status_file.read_text().strip() == "0", status_file.read_text()
            assert not alive(host_pid)
            assert took > 0.1, f"the call finished {took:.2f} s after SIGTERM: was it in flight?"


# ---------------------------------------------------------------------------------------
# Item 7: replay as seed 004 defines it (retries counted for layout ops too).

HUGE_ARRAY = ROOT / "fixtures" / "layouts" / "observer_huge_array.gds"


async def test_a_layout_op_replayed_after_its_worker_died_counts_in_telemetry_retries(reticle_bin, server_env):
    with anyio.fail_after(120):
        async with Client(params(reticle_bin, server_env), mode="auto") as client:
            opened = await client.call_tool("open_layout", {"path": str(HUGE_ARRAY), "render": "json"})
            sid = opened.structured_content["session_id"]
            answer = {}

            async def render():
                # A render of a million-placement array: about a second of work.
                answer["result"] = await client.call_tool(
                    "render_view", {"session_id": sid, "image_size": {"width": 400, "height": 400}, "render": "json"}
                )

            async with anyio.create_task_group() as group:
                group.start_soon(render)
                pid = await busy_worker_pid(client)
                os.kill(pid, signal.SIGKILL)
            result = answer["result"]
            assert not result.is_error, result.content[0].text
            assert pathlib.Path(result.structured_content["image"]["path"]).is_file()
            telemetry = (await client.call_tool("telemetry", {"render": "json"})).structured_content
            assert telemetry["totals"]["retries"] == 1, telemetry["totals"]
            assert telemetry["dispatch"]["replays"] == 1, telemetry["dispatch"]
            methods = {m["method"]: m for m in telemetry["methods"]}
            assert methods["tools/call:render_view"]["retries"] == 1, methods["tools/call:render_view"]
            assert methods["tools/call:open_layout"]["retries"] == 0
            assert telemetry["journal"]["replays"] >= 1, telemetry["journal"]


async def test_close_session_interrupted_by_a_reexec_completes_from_its_probe(reticle_bin, server_env):
    """close_session is ProbeRequired: the new image probes, sees the close happened, and
    answers it from the probe instead of failing with an unknown outcome or closing again."""
    env = dict(server_env, RETICLE_DEBUG_TOOLS="1", RETICLE_DEBUG_ANSWER_DELAY="close_session:8000")
    with anyio.fail_after(120):
        async with Client(params(reticle_bin, env), mode="auto") as client:
            opened = (await client.call_tool("open_layout", {"path": str(DEMO_GDS), "render": "json"})).structured_content
            sid, artifacts = opened["session_id"], pathlib.Path(opened["artifact_root"])
            assert artifacts.is_dir()
            answer = {}

            async def close():
                answer["result"] = await client.call_tool("close_session", {"session_id": sid, "render": "json"})

            async with anyio.create_task_group() as group:
                group.start_soon(close)
                # The close takes effect at once; its answer is held (the debug delay).
                for _ in range(500):
                    if not artifacts.exists():
                        break
                    await anyio.sleep(0.01)
                assert not artifacts.exists(), "the close did not take effect"
                reexec = await anyio.run_process([reticle_bin, "ctl", "reexec"], env=env, check=False)
                assert reexec.returncode == 0, reexec.stderr
            result = answer["result"]
            assert not result.is_error, result.content[0].text
            closed = result.structured_content
            assert closed["closed"] is True and closed["artifact_dir_deleted"] is True, closed
            assert closed["state_after"] == {"session_id": sid, "open": False, "live_sessions": 0}
            health = (await client.call_tool("health", {"render": "json"})).structured_content
            assert health["server"]["reexecs"] == 1
            journal = (await client.call_tool("telemetry", {"render": "json"})).structured_content["journal"]
            assert journal["probes"] == 1 and journal["completed_from_probe"] == 1, journal
    probes = [r for r in events(pathlib.Path(server_env["RETICLE_LOG_DIR"])) if r["event"] == "request.probe"]
    assert [(p["evidence"], p["decision"]) for p in probes] == [("AlreadyCompleted", "CompleteFromProbe")], probes
