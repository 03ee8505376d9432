"""Post-OPC verification (issue 28 item 4, D180): `evaluate` and `simulate` with
`mask_layer` image that layer and check the print against the target layer.

The layouts are gcd_45nm plus a mask layer 11/1 that gdstk writes: an exact copy of metal 1
(11/0), and a copy with one wire moved. Imaging the copy must give what imaging 11/0 gives
(same print, same EPE, same records), in a single window and in tiles; imaging the moved
copy must not (the print moves, the target does not: EPE and L2 change). The host is the
release binary driven through the Python MCP SDK.
"""

import os
import pathlib

import gdstk
import pytest
from mcp import Client, StdioServerParameters

from layouts import gcd_path
from wholelayout import release_bin  # noqa: F401 (fixture)

DECK = "nangate45_m1_litho"
# One window of the default model's period (2.048 µm), and a 3 µm box (tiled).
WINDOW = [6.0, 6.0, 8.048, 8.048]
TILED = [5.0, 5.0, 8.0, 8.0]
PIXEL_NM = 4


def with_mask_layer(out: pathlib.Path, moved_nm: float = 0.0) -> pathlib.Path:
    """gcd_45nm with 11/1 = the flattened 11/0; with `moved_nm`, the 11/1 copy of the
    polygon nearest the window's centre is moved right by that much."""
    lib = gdstk.read_gds(str(gcd_path()))
    (top,) = lib.top_level()
    polygons = top.get_polygons(layer=11, datatype=0)
    assert polygons, "gcd_45nm has no 11/0 shapes"
    cx, cy = (WINDOW[0] + WINDOW[2]) / 2, (WINDOW[1] + WINDOW[3]) / 2
    nearest = min(
        range(len(polygons)),
        key=lambda i: (
            (polygons[i].bounding_box()[0][0] + polygons[i].bounding_box()[1][0]) / 2 - cx
        )
        ** 2
        + ((polygons[i].bounding_box()[0][1] + polygons[i].bounding_box()[1][1]) / 2 - cy)
        ** 2,
    )
    for i, p in enumerate(polygons):
        copy = gdstk.Polygon(p.points, layer=11, datatype=1)
        if moved_nm and i == nearest:
            copy.translate(moved_nm / 1000, 0)
        top.add(copy)
    lib.write_gds(str(out))
    return out


def server_env(tmp_path, roots):
    env = dict(os.environ)
    env["RETICLE_ALLOWED_ROOTS"] = ":".join(str(r) for r in roots)
    env["RETICLE_BACKEND"] = "cpu"
    env["KLAYOUT_MCP_ARTIFACT_ROOT"] = str(tmp_path / "artifacts")
    env["RETICLE_LOG_DIR"] = str(tmp_path / "logs")
    return env


async def call(client, tool, args):
    result = await client.call_tool(tool, {**args, "wait": True, "render": "json"})
    return result


def comparable(report: dict) -> dict:
    """What does not depend on which layer was imaged when the mask equals the target."""
    return {
        "metrics": report["metrics"],
        "counts": report["counts"],
        "violations": report.get("violations"),
    }


@pytest.mark.anyio
async def test_mask_layer_equal_to_the_target_changes_nothing_and_a_moved_mask_does(
    release_bin, tmp_path  # noqa: F811
):
    same = with_mask_layer(tmp_path / "gcd_mask_copy.gds")
    moved = with_mask_layer(tmp_path / "gcd_mask_moved.gds", moved_nm=24)
    params = StdioServerParameters(
        command=release_bin, args=["serve"], env=server_env(tmp_path, [tmp_path])
    )
    async with Client(params, read_timeout_seconds=600) as client:
        for box in (WINDOW, TILED):
            base = {
                "layout": str(same),
                "deck": DECK,
                "layer": "11/0",
                "box_um": box,
                "pixel_nm": PIXEL_NM,
                "report_level": "detailed",
            }
            drawn = await call(client, "evaluate", base)
            assert not drawn.is_error, drawn.structured_content
            drawn = drawn.structured_content
            post = await call(client, "evaluate", {**base, "mask_layer": "11/1"})
            assert not post.is_error, post.structured_content
            post = post.structured_content
            assert "mask_layer" not in drawn["layout"]
            assert post["layout"]["mask_layer"] == "11/1", post["layout"]
            assert drawn["metrics"]["epe"]["checkpoints"] > 0, drawn["metrics"]
            assert comparable(post) == comparable(drawn), f"box {box}"

            shifted = await call(
                client, "evaluate", {**base, "layout": str(moved), "mask_layer": "11/1"}
            )
            assert not shifted.is_error, shifted.structured_content
            shifted = shifted.structured_content
            # The target did not move, the print did: same checkpoints, other EPE, more L2.
            assert shifted["metrics"]["epe"]["checkpoints"] == drawn["metrics"]["epe"]["checkpoints"]
            assert shifted["metrics"]["epe"] != drawn["metrics"]["epe"], f"box {box}"
            assert shifted["metrics"]["l2_px"] > drawn["metrics"]["l2_px"], f"box {box}"

            sim = {k: base[k] for k in ("layout", "layer", "box_um", "pixel_nm")}
            s_drawn = await call(client, "simulate", sim)
            s_post = await call(client, "simulate", {**sim, "mask_layer": "11/1"})
            s_moved = await call(
                client, "simulate", {**sim, "layout": str(moved), "mask_layer": "11/1"}
            )
            for r in (s_drawn, s_post, s_moved):
                assert not r.is_error, r.structured_content
            s_drawn, s_post, s_moved = (
                r.structured_content for r in (s_drawn, s_post, s_moved)
            )
            assert s_post["metrics"] == s_drawn["metrics"], f"box {box}"
            assert s_moved["metrics"] != s_drawn["metrics"], f"box {box}"

        # The mask layer must be another layer than the target, and named with one.
        bad = await call(
            client,
            "evaluate",
            {"layout": str(same), "deck": DECK, "layer": "11/0", "mask_layer": "11/0",
             "box_um": WINDOW},
        )
        assert bad.is_error
        assert bad.structured_content["error"]["code"] == "INVALID_LAYER", bad.structured_content
