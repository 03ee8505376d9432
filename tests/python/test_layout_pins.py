"""`layout_artifact_id` pins (issue 28 item 7, D214), through the Python MCP SDK.

A tiled `evaluate` keeps a copy of the layout version it evaluated in its job's directory.
After the file is overwritten with another layout, `optimize(violation_id)` of one of that
evaluation's ids still resolves — against the pinned version (`resolved_from:
layout_pin`) — and repairs its group. Once the evaluation job's directory has expired
(a short artifact TTL here), the same call is the typed `LAYOUT_NOT_PINNED` error with
`reason: pin_expired`, not a wrong answer on the new file.
"""

import os
import shutil
import time

import pytest
from mcp import Client, StdioServerParameters

from layouts import ROOT, gcd_path
from wholelayout import release_bin  # noqa: F401 (fixture)

BOX = [6.0, 6.0, 8.4, 8.4]
PIXEL_NM = 8
TTL_S = 20


@pytest.mark.anyio
async def test_an_edited_layouts_ids_resolve_against_the_pin_until_the_job_expires(
    release_bin, tmp_path  # noqa: F811
):
    work = tmp_path / "work"
    work.mkdir()
    gds = work / "chip.gds"
    shutil.copyfile(gcd_path(), gds)
    env = dict(os.environ)
    env["RETICLE_ALLOWED_ROOTS"] = str(work)
    env["RETICLE_BACKEND"] = "cpu"
    env["KLAYOUT_MCP_ARTIFACT_ROOT"] = str(tmp_path / "artifacts")
    env["KLAYOUT_MCP_SESSION_TTL_SECONDS"] = str(TTL_S)
    env["RETICLE_LOG_DIR"] = str(tmp_path / "logs")
    params = StdioServerParameters(command=release_bin, args=["serve"], env=env)
    async with Client(params, read_timeout_seconds=900) as client:
        result = await client.call_tool(
            "evaluate",
            {"layout": str(gds), "deck": "nangate45_m1_litho", "layer": "11/0",
             "box_um": BOX, "pixel_nm": PIXEL_NM, "report_level": "detailed",
             "wait": True, "render": "json"},
        )
        assert not result.is_error, result.structured_content
        report = result.structured_content
        records = [r for r in report["violations"] if r["dedup_strategy"] == "canonical"]
        assert records, "the box has no violation"
        record = records[0]
        sha = report["layout"]["sha256"].removeprefix("sha256:")
        pins = list((tmp_path / "artifacts").rglob(f"layout_pin/{sha}.gds"))
        assert len(pins) == 1, f"the evaluation pinned no copy of {sha}"
        assert pins[0].read_bytes() == gds.read_bytes()

        # The file overwritten with another layout after the evaluation.
        shutil.copyfile(ROOT / "fixtures" / "layouts" / "acceptance_100x4tiles.gds", gds)
        out = await client.call_tool(
            "optimize", {"violation_id": record["violation_id"], "wait": True, "render": "json"}
        )
        assert not out.is_error, out.structured_content
        out = out.structured_content
        assert out["target"]["resolved_from"] == "layout_pin", out["target"]
        assert out["target"]["violation_group_id"] == record["violation_group_id"], out["target"]
        assert record["violation_id"] in {m["violation_id"] for m in out["group_members"]}
        assert out["layout"]["sha256"].removeprefix("sha256:") == sha, out["layout"]

        # The evaluation job's directory expires with the artifact TTL: no pin is left.
        time.sleep(TTL_S + 2)
        gone = await client.call_tool(
            "optimize", {"violation_id": record["violation_id"], "wait": True, "render": "json"}
        )
        assert gone.is_error, gone.structured_content
        error = gone.structured_content["error"]
        assert error["code"] == "LAYOUT_NOT_PINNED", error
        assert error["details"]["reason"] == "pin_expired", error
        assert not list((tmp_path / "artifacts").rglob(f"layout_pin/{sha}.gds"))
