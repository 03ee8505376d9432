"""Manufacturable masks (issue 26): `optimize` on the ten ICCAD-2013 clips returns masks that
pass the deck's own mask rules, by reticle's check and by KLayout's on the GDSII it wrote.

The host is the release binary (as a user runs it), driven through the Python MCP SDK; the
written GDSII is read with the `klayout` package and checked with KLayout's own width,
space and notch checks at the deck's MRC value. Manhattan masks are also checked edge by
edge: axis-parallel, every segment at least the 4 nm grid.
"""

import json
import os
import pathlib

import anyio
import klayout.db as kdb
import pytest
from mcp import Client, StdioServerParameters

from wholelayout import data_dir, release_bin  # noqa: F401 (fixture)

ROOT = pathlib.Path(__file__).resolve().parents[2]
DECK = json.loads((ROOT / "fixtures" / "decks" / "iccad13_m1.json").read_text())
MRC = {r["id"]: r for r in DECK["rules"] if r.get("applies_to") == "mask"}
MANHATTAN_GRID_NM = 4


def klayout_mask_rule_markers(gds: str) -> dict:
    """KLayout's width/space/notch markers below each MRC value on the written mask."""
    layout = kdb.Layout()
    layout.read(gds)
    region = kdb.Region(layout.top_cell().begin_shapes_rec(layout.layer(1, 0)))
    region.merge()
    dbu_nm = layout.dbu * 1000
    out = {}
    for rule_id, rule in MRC.items():
        d = int(round(rule["value"] / dbu_nm))
        if rule["kind"] == "width":
            out[rule_id] = region.width_check(d).count()
        elif rule["kind"] == "space":
            out[rule_id] = region.space_check(d).count()
        elif rule["kind"] == "notch":
            out[rule_id] = region.notch_check(d, False, kdb.Metrics.Projection).count()
    return out, region


def manhattan_problems(region) -> list:
    """Edges that are not axis-parallel or shorter than the grid (cut lines excepted)."""
    bad = []
    for poly in region.each():
        for edge in poly.each_edge():
            dx, dy = abs(edge.dx()), abs(edge.dy())
            if dx and dy:
                bad.append(f"diagonal {edge}")
            elif 0 < dx + dy < MANHATTAN_GRID_NM:
                bad.append(f"short {edge}")
    return bad


async def optimize_clips(release_bin, env, clips, style):
    results = {}
    async with Client(StdioServerParameters(command=release_bin, args=["serve"], env=env),
                      read_timeout_seconds=600) as client:
        for clip in clips:
            args = {
                "layout": str(clip),
                "deck": "iccad13_m1",
                "model": {"kind": "kernels", "dir": str(clip.parent.parent / "kernels")},
                "mask_style": style,
                "wait": True,
                "render": "json",
            }
            result = await client.call_tool("optimize", args)
            assert not result.is_error, result.structured_content
            results[clip.stem] = result.structured_content
    return results


def server_env(tmp_path, data):
    env = dict(os.environ)
    env["RETICLE_ALLOWED_ROOTS"] = str(data)
    env["RETICLE_BACKEND"] = "cpu"
    env["KLAYOUT_MCP_ARTIFACT_ROOT"] = str(tmp_path / "artifacts")
    env["RETICLE_LOG_DIR"] = str(tmp_path / "logs")
    return env


def clips():
    layouts = data_dir() / "iccad13" / "layouts"
    found = sorted(layouts.glob("M1_test*.glp"), key=lambda p: int(p.stem.removeprefix("M1_test")))
    assert len(found) == 10, f"the ten ICCAD-2013 clips are expected in {layouts}"
    return found


def check_legal(out, style):
    assert out["mask_style"] == style
    assert out["mask_rules"]["records"] == 0, out["mask_rules"]
    assert sorted(out["mask_rules"]["rules"]) == sorted(MRC)
    for entry in out["violations_after"]["by_rule"]:
        if entry["applies_to"] == "mask":
            assert entry["records"] == 0, entry
    assert out["state_after"]["polygons"]["written_as"] == "whole_polygons"
    gds = out["state_after"]["mask_gds"]["path"]
    markers, region = klayout_mask_rule_markers(gds)
    assert markers == {k: 0 for k in MRC}, f"KLayout on {gds}: {markers}"
    # Whole polygons: as many written as KLayout merges.
    assert region.count() == out["state_after"]["polygons"]["merged_polygons"]
    return region


@pytest.mark.anyio
async def test_every_clip_is_legal_by_reticle_and_by_klayout(release_bin, tmp_path):
    data = data_dir()
    results = await optimize_clips(release_bin, server_env(tmp_path, data), clips(), "curvilinear")
    l2 = [out["metrics"]["after"]["l2_px"] for out in results.values()]
    pvb = [out["metrics"]["after"]["pvb_px"] for out in results.values()]
    for name, out in results.items():
        check_legal(out, "curvilinear")
        assert out["metrics"]["after"]["l2_px"] < out["metrics"]["before"]["l2_px"], name
        assert out["ilt"]["after"]["l2"] == out["metrics"]["after"]["l2_px"], name
    print(f"curvilinear: average L2 {sum(l2) / len(l2):.0f}, PVB {sum(pvb) / len(pvb):.0f}")


@pytest.mark.anyio
async def test_manhattan_masks_are_axis_parallel_on_the_grid_and_legal(release_bin, tmp_path):
    data = data_dir()
    chosen = clips()[:2]
    results = await optimize_clips(release_bin, server_env(tmp_path, data), chosen, "manhattan")
    for name, out in results.items():
        region = check_legal(out, "manhattan")
        assert manhattan_problems(region) == [], name


@pytest.mark.anyio
async def test_optimize_of_a_violation_creates_no_mask_rule_record(release_bin, tmp_path):
    data = data_dir()
    env = server_env(tmp_path, data)
    async with Client(StdioServerParameters(command=release_bin, args=["serve"], env=env),
                      read_timeout_seconds=600) as client:
        # Issue 26: on any of the ten clips, an EPE record's window (with its halo).
        for clip in clips():
            common = {
                "layout": str(clip),
                "deck": "iccad13_m1",
                "model": {"kind": "kernels", "dir": str(clip.parent.parent / "kernels")},
            }
            report = await client.call_tool("evaluate", {**common, "report_level": "detailed", "wait": True, "render": "json"})
            assert not report.is_error, report.structured_content
            records = report.structured_content["violations"]
            before_mask = [r for r in records if r["rule_id"] in MRC]
            assert before_mask == [], "the drawn clip passes the mask rules"
            target = next(r for r in records if r["rule_id"] == "M1.EPE.1")
            result = await client.call_tool("optimize", {"violation_id": target["violation_id"], "wait": True, "render": "json"})
            assert not result.is_error, result.structured_content
            out = result.structured_content
            assert out["target"]["resolved_from"] == "session_cache"
            assert out["mask_rules"]["records"] == 0, out["mask_rules"]
            new = [g for g in out["violations_after"]["by_rule"] if g["rule_id"] in MRC and g["records"]]
            assert new == [], new
            markers, _ = klayout_mask_rule_markers(out["state_after"]["mask_gds"]["path"])
            assert markers == {k: 0 for k in MRC}, markers
