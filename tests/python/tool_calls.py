"""One successful call per tool, shared by the stdio and the Streamable HTTP tests.

The SDK validates structuredContent against the tool's declared outputSchema on every
non-error result, so a payload that drifts from its schema fails here. The set of
tools called must equal the set listed.
"""

import os
import shutil

import pytest

from conftest import LAYOUT, ROOT

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


def mbox(left, bottom, right, top):
    return {"left": left, "bottom": bottom, "right": right, "top": top}


def require_klayout():
    """run_drc_script needs the KLayout binary; without it the every-tool tests skip, saying why."""
    klayout = os.environ.get("KLAYOUT_BIN", "klayout")
    if shutil.which(klayout) is None:
        pytest.skip(f"KLayout ({klayout}) is not installed: run_drc_script cannot succeed; run scripts/setup.sh test")


async def call_every_tool(client):
    """Calls every listed tool once, successfully; asserts the called set is the listed set.

    The host must run with RETICLE_BACKEND_URL pointing at a store that accepts uploads
    (the `backend_url` fixture) for populate_backend.
    """
    called = set()

    async def ok(name, args):
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

    tools = await client.list_tools()
    names = {t.name for t in tools.tools}
    for name, args in SAMPLE_ARGS.items():
        await ok(name, args)
    # Job tools: a job to poll, then cancel (a no-op once it finished).
    job = await ok("simulate", {"layout": str(LAYOUT)})
    await ok("poll", {"job_id": job["job_id"]})
    await ok("cancel", {"job_id": job["job_id"]})
    # A tiled evaluation's records, paged by `violations`.
    tiled = await ok("evaluate", {"layout": str(LAYOUT), "deck": "iccad13_m1",
                                  "tiling": "tiles", "pixel_nm": 8, "wait": True})
    assert tiled["imaging"]["mode"] == "tiled", tiled
    page = await ok("violations", {"job_id": tiled["job_id"], "limit": 5})
    assert page["job_id"] == tiled["job_id"], page
    # The layout observer tools, in one session.
    opened = await ok("open_layout", {"path": str(DEMO_GDS)})
    sid = opened["session_id"]
    await ok("list_cells", {"session_id": sid})
    await ok("describe_cell", {"session_id": sid})
    await ok("list_layers", {"session_id": sid})
    query = await ok("query_region", {
        "session_id": sid, "box": mbox(-1.0, -1.0, 41.0, 1.0),
        "layers": [{"layer": 1, "datatype": 0}], "hierarchy_mode": "top",
    })
    path_id = query["shapes"][0]["id"]
    await ok("measure_geometry", {"session_id": sid, "mode": "path_width", "target_ids": [path_id]})
    await ok("analyze_waveguide", {"session_id": sid, "target_id": path_id})
    await ok("set_view", {"session_id": sid, "box": mbox(0.0, -5.0, 40.0, 5.0)})
    await ok("render_view", {"session_id": sid, "image_size": {"width": 200, "height": 100}})
    run = await ok("run_drc_script", {"session_id": sid, "script_path": str(DRC_DECK)})
    await ok("extract_markers", {"session_id": sid, "run_id": run["run_id"], "include_crops": False})
    await ok("close_session", {"session_id": sid})
    assert called == names, (sorted(names - called), sorted(called - names))
    return called
