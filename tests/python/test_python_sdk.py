"""The official Python MCP SDK (2.x) talks to reticle over stdio in both eras."""

import http.server
import json
import os
import shutil
import threading

import anyio
import pytest
from mcp import Client

from conftest import LAYOUT, ROOT, params


pytestmark = pytest.mark.anyio


async def list_and_call(client):
    tools = await client.list_tools()
    names = sorted(t.name for t in tools.tools)
    assert "health" in names and "telemetry" in names, names
    for tool in tools.tools:
        assert tool.input_schema["additionalProperties"] is False, tool.name
        assert tool.output_schema is not None, tool.name
    result = await client.call_tool("health", {})
    assert not result.is_error, result
    payload = result.structured_content
    assert payload["status"] == "ok"
    assert payload["server"]["name"] == "reticle"
    assert payload["schema_version"].count(".") == 2
    return payload


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_connect_list_call(reticle_bin, server_env, mode):
    with anyio.fail_after(60):
        async with Client(params(reticle_bin, server_env), mode=mode) as client:
            payload = await list_and_call(client)
            session = client.session
            if mode == "legacy":
                assert session.initialize_result is not None
                assert session.protocol_version in ("2025-11-25", "2025-06-18")
            else:
                # auto probes server/discover first and must stay modern.
                assert session.discover_result is not None, "auto mode fell back to legacy"
                assert session.protocol_version == "2026-07-28"
                assert "2026-07-28" in session.discover_result.supported_versions
            assert payload["server"]["pid"] > 0


async def test_bad_arguments_are_tool_errors(reticle_bin, server_env):
    with anyio.fail_after(60):
        async with Client(params(reticle_bin, server_env), mode="auto") as client:
            result = await client.call_tool("health", {"detial": "full"})
            assert result.is_error
            error = result.structured_content["error"]
            assert error["code"] == "INVALID_INPUT"
            assert error["recoverable"] is True
            assert any("detial" in e["msg"] for e in error["details"]["errors"]), error


async def test_telemetry_counts_calls(reticle_bin, server_env):
    with anyio.fail_after(60):
        async with Client(params(reticle_bin, server_env), mode="legacy") as client:
            for _ in range(3):
                await client.call_tool("health", {})
            result = await client.call_tool("telemetry", {"render": "json", "detail": "full"})
            assert not result.is_error, result
            methods = {m["method"]: m for m in result.structured_content["telemetry"]["methods"]}
            assert methods["tools/call:health"]["request_count"] == 3, methods


# One successful call per tool: the SDK validates structuredContent against the
# tool's declared outputSchema on every non-error result, so a payload that drifts
# from its schema fails here. The set of tools called must equal the set listed.
SAMPLE_ARGS = {
    "health": {"detail": "full"},
    "telemetry": {"render": "json"},
    "list_schemas": {},
    "get_schema": {"name": "health.output"},
    "validate_asset": {"schema": "poll.input", "asset": {"job_id": 3}},
    "diff_assets": {"base": {"a": [1]}, "new": {"a": [2], "b": {"c": 1}}},
    "list_examples": {"component": "all"},
    "get_example": {"path": "protocol/examples/health-request.json"},
    "simulate": {"layout": str(LAYOUT), "wait": True},
    "evaluate": {"layout": str(LAYOUT), "deck": "iccad13_m1", "wait": True},
    "populate_backend": {"asset": {"job_id": "job_1"}, "schema": "poll.input"},
    "optimize": {"layout": str(LAYOUT), "deck": "iccad13_m1", "pixel_nm": 8, "iterations": 2,
                 "refine_iterations": 0, "wait": True},
}
DEMO_GDS = ROOT / "fixtures" / "layouts" / "observer_demo.gds"
DRC_DECK = ROOT / "fixtures" / "decks" / "width_space.drc"


class Backend(http.server.BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 (http.server API)
        self.rfile.read(int(self.headers["Content-Length"]))
        data = json.dumps({"id": "asset-1"}).encode()
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def backend_url():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Backend)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def mbox(left, bottom, right, top):
    return {"left": left, "bottom": bottom, "right": right, "top": top}


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_every_tool_output_matches_its_schema(reticle_bin, server_env, backend_url, mode):
    klayout = os.environ.get("KLAYOUT_BIN", "klayout")
    if shutil.which(klayout) is None:
        pytest.skip(f"KLayout ({klayout}) is not installed: run_drc_script cannot succeed; run scripts/setup.sh test")
    env = dict(server_env, RETICLE_BACKEND_URL=backend_url)
    called = set()

    async def ok(client, name, args):
        result = await client.call_tool(name, args)
        assert not result.is_error, (name, result)
        assert result.structured_content["schema_version"], name
        assert result.content and result.content[0].type == "text", name
        # Porcelain (the default) is bounded, line-oriented text, never the JSON dump.
        if args.get("render") != "json":
            text = result.content[0].text
            assert len(text.splitlines()) <= 200 and not text.startswith("{"), (name, text)
        called.add(name)
        return result.structured_content

    with anyio.fail_after(120):
        async with Client(params(reticle_bin, env), mode=mode) as client:
            tools = await client.list_tools()
            names = {t.name for t in tools.tools}
            for name, args in SAMPLE_ARGS.items():
                await ok(client, name, args)
            # Job tools: a job to poll, then cancel (a no-op once it finished).
            job = await ok(client, "simulate", {"layout": str(LAYOUT)})
            await ok(client, "poll", {"job_id": job["job_id"]})
            await ok(client, "cancel", {"job_id": job["job_id"]})
            # A tiled evaluation's records, paged by `violations`.
            tiled = await ok(client, "evaluate", {"layout": str(LAYOUT), "deck": "iccad13_m1",
                                                  "tiling": "tiles", "pixel_nm": 8, "wait": True})
            assert tiled["imaging"]["mode"] == "tiled", tiled
            page = await ok(client, "violations", {"job_id": tiled["job_id"], "limit": 5})
            assert page["job_id"] == tiled["job_id"], page
            # The layout observer tools, in one session.
            opened = await ok(client, "open_layout", {"path": str(DEMO_GDS)})
            sid = opened["session_id"]
            await ok(client, "list_cells", {"session_id": sid})
            await ok(client, "describe_cell", {"session_id": sid})
            await ok(client, "list_layers", {"session_id": sid})
            query = await ok(client, "query_region", {
                "session_id": sid, "box": mbox(-1.0, -1.0, 41.0, 1.0),
                "layers": [{"layer": 1, "datatype": 0}], "hierarchy_mode": "top",
            })
            path_id = query["shapes"][0]["id"]
            await ok(client, "measure_geometry", {"session_id": sid, "mode": "path_width", "target_ids": [path_id]})
            await ok(client, "analyze_waveguide", {"session_id": sid, "target_id": path_id})
            await ok(client, "set_view", {"session_id": sid, "box": mbox(0.0, -5.0, 40.0, 5.0)})
            await ok(client, "render_view", {"session_id": sid, "image_size": {"width": 200, "height": 100}})
            run = await ok(client, "run_drc_script", {"session_id": sid, "script_path": str(DRC_DECK)})
            await ok(client, "extract_markers", {"session_id": sid, "run_id": run["run_id"], "include_crops": False})
            await ok(client, "close_session", {"session_id": sid})
            assert called == names, (sorted(names - called), sorted(called - names))


async def test_simulate_job_is_polled_to_completion(reticle_bin, server_env):
    with anyio.fail_after(120):
        async with Client(params(reticle_bin, server_env), mode="auto") as client:
            started = await client.call_tool("simulate", {"layout": str(LAYOUT)})
            assert not started.is_error, started
            job_id = started.structured_content["job_id"]
            assert started.structured_content["status"] in ("queued", "running")
            while True:
                polled = await client.call_tool("poll", {"job_id": job_id, "render": "json"})
                assert not polled.is_error, polled
                status = polled.structured_content["status"]
                if status not in ("queued", "running"):
                    break
                await anyio.sleep(0.1)
            assert status == "completed", polled.structured_content
            result = polled.structured_content["result"]
            assert result["metrics"]["epe"]["checkpoints"] > 0, result
            assert result["backend"]["kind"] == "cpu", result


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_call_the_client_gives_up_on_is_cancelled_on_the_host(reticle_bin, server_env, mode):
    """The SDK cancels a timed-out call (anyio.move_on_after); the host must stop the job."""
    with anyio.fail_after(120):
        async with Client(params(reticle_bin, server_env), mode=mode) as client:
            # 4096×4096 pixels: about 2 s on two cores, so the client gives up mid-run.
            with anyio.move_on_after(0.5) as scope:
                await client.call_tool("simulate", {"layout": str(LAYOUT), "pixel_nm": 0.5, "wait": True})
            assert scope.cancelled_caught, "the 4096×4096 simulation finished in under 0.5 s?"
            jobs = None
            for _ in range(100):
                telemetry = await client.call_tool("telemetry", {"render": "json"})
                jobs = telemetry.structured_content["jobs"]
                if jobs["cancelled"] == 1:
                    break
                await anyio.sleep(0.05)
            assert jobs["cancelled"] == 1 and jobs["completed"] == 0, jobs
            again = await client.call_tool("simulate", {"layout": str(LAYOUT), "wait": True})
            assert not again.is_error, again
            assert again.structured_content["status"] == "completed"


async def test_evaluate_detailed_through_the_sdk(reticle_bin, server_env):
    with anyio.fail_after(120):
        async with Client(params(reticle_bin, server_env), mode="auto") as client:
            tools = await client.list_tools()
            evaluate = next(t for t in tools.tools if t.name == "evaluate")
            caps = (evaluate.meta or {}).get("capabilities", {})
            assert caps.get("report_levels") == ["aggregate", "detailed"], evaluate
            result = await client.call_tool(
                "evaluate",
                {"layout": str(LAYOUT), "deck": "iccad13_m1", "report_level": "detailed", "wait": True},
            )
            assert not result.is_error, result
            report = result.structured_content
            assert report["schema_version"]
            assert report["counts"]["records"] == len(report["violations"])
            for v in report["violations"]:
                assert v["coordinate_frame"] == "input_layout_native"
                assert v["dedup_strategy"] in ("canonical", "shadow")
                assert v["violation_id"].startswith("rv1:")
