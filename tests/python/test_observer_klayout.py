"""Cross-check of the layout observer tools against KLayout itself.

Layouts are written by gdstk and by KLayout's own Python module, in GDSII and OASIS, with
hierarchy, arrays, rotations, mirrors, magnification, paths and texts. Each is opened
through reticle with the official MCP client; cells, top cells, layers, bounding boxes and
per-layer shape counts must equal what the `klayout` package reports for the same file.
"""

import math

import anyio
import gdstk
import klayout.db as kdb
import pytest
from mcp import Client

from conftest import params

pytestmark = pytest.mark.anyio


def write_gdstk(directory):
    lib = gdstk.Library(name="GDSTK", unit=1e-6, precision=1e-9)
    leaf = lib.new_cell("LEAF")
    leaf.add(gdstk.rectangle((0, 0), (1, 0.5), layer=1, datatype=0))
    leaf.add(gdstk.Polygon([(0, 1), (2, 1), (1, 2.5)], layer=2, datatype=3))
    leaf.add(gdstk.Label("pin", (0.5, 0.25), layer=20, texttype=1))
    mid = lib.new_cell("MID")
    mid.add(gdstk.Reference(leaf, (0, 0)))
    mid.add(gdstk.Reference(leaf, (10, 0), rotation=math.pi / 2))
    mid.add(gdstk.Reference(leaf, (20, 0), rotation=math.pi, x_reflection=True))
    mid.add(gdstk.FlexPath([(0, -5), (10, -5), (10, -15)], 0.4, layer=5, simple_path=True))
    mid.add(gdstk.FlexPath([(0, -20), (8, -20)], 1.0, ends="extended", layer=5, simple_path=True))
    top = lib.new_cell("TOP")
    top.add(gdstk.Reference(mid, (0, 0)))
    top.add(gdstk.Reference(mid, (100, 50), rotation=-math.pi / 2, magnification=2))
    top.add(gdstk.Reference(leaf, (-40, -40), columns=7, rows=3, spacing=(3, 4)))
    top.add(gdstk.rectangle((-50, -50), (150, -49), layer=1))
    top.add(gdstk.Label("TOP_LABEL", (0, 0), layer=20, texttype=1))
    other = lib.new_cell("ANOTHER_TOP")
    other.add(gdstk.rectangle((0, 0), (3, 3), layer=7))
    out = []
    gds = directory / "gdstk_layout.gds"
    lib.write_gds(str(gds))
    out.append(gds)
    oas = directory / "gdstk_layout.oas"
    lib.write_oas(str(oas))
    out.append(oas)
    return out


def write_klayout(directory):
    ly = kdb.Layout()
    ly.dbu = 0.001
    l1 = ly.layer(1, 0)
    l2 = ly.layer(2, 5)
    lt = ly.layer(30, 0)
    unit = ly.create_cell("UNIT")
    unit.shapes(l1).insert(kdb.DBox(0, 0, 0.8, 0.3))
    unit.shapes(l2).insert(kdb.DPolygon([kdb.DPoint(0, 0), kdb.DPoint(1, 0), kdb.DPoint(1, 1), kdb.DPoint(0.5, 2)]))
    unit.shapes(l2).insert(kdb.DPath([kdb.DPoint(0, 3), kdb.DPoint(4, 3), kdb.DPoint(4, 7)], 0.25))
    unit.shapes(lt).insert(kdb.DText("u", kdb.DTrans(kdb.DVector(0.1, 0.1))))
    block = ly.create_cell("BLOCK")
    block.insert(kdb.DCellInstArray(unit.cell_index(), kdb.DTrans(kdb.DTrans.R90, kdb.DVector(5, 5))))
    block.insert(kdb.DCellInstArray(unit.cell_index(), kdb.DTrans(kdb.DTrans.M45, kdb.DVector(-5, 2))))
    block.shapes(l1).insert(kdb.DBox(-10, -10, -9, 20))
    top = ly.create_cell("CHIP")
    top.insert(kdb.DCellInstArray(block.cell_index(), kdb.DTrans(kdb.DVector(0, 0)), kdb.DVector(30, 0), kdb.DVector(0, 40), 4, 2))
    top.insert(kdb.DCellInstArray(unit.cell_index(), kdb.DCplxTrans(1.5, 180.0, False, kdb.DVector(200, 10))))
    top.shapes(lt).insert(kdb.DText("chip", kdb.DTrans(kdb.DVector(1, 1))))
    top.shapes(l1).insert(kdb.DPath([kdb.DPoint(-20, -20), kdb.DPoint(200, -20)], 2.0, 1.0, 1.0, False))
    out = []
    for name in ("klayout_layout.gds", "klayout_layout.oas"):
        path = directory / name
        ly.write(str(path))
        out.append(path)
    return out


def klayout_facts(path):
    """What KLayout reports for the file: cells, tops, boxes, layers, per-layer counts."""
    ly = kdb.Layout()
    ly.read(str(path))
    tops = sorted(c.name for c in ly.top_cells())
    top = ly.cell(tops[0])
    layers = []
    for li in ly.layer_indexes():
        info = ly.get_info(li)
        count = 0
        it = top.begin_shapes_rec(li)
        while not it.at_end():
            count += 1
            it.next()
        used = any(not ly.cell(ci).shapes(li).is_empty() for ci in range(ly.cells()))
        if used:
            layers.append((info.layer, info.datatype, count))
    layers.sort()
    cells = {}
    for ci in range(ly.cells()):
        cell = ly.cell(ci)
        b = cell.dbbox()
        bbox = None if b.empty() else [round(v, 6) for v in (b.left, b.bottom, b.right, b.top)]
        shapes = sum(cell.shapes(li).size() for li in ly.layer_indexes())
        cells[cell.name] = {
            "bbox": bbox,
            "is_top": cell.is_top(),
            "shapes": shapes,
            "instances": cell.child_instances(),
        }
    return {"dbu": ly.dbu, "tops": tops, "layers": layers, "cells": cells}


def as_box(b):
    return None if b is None else [b["left"], b["bottom"], b["right"], b["top"]]


async def call(client, tool, args):
    result = await client.call_tool(tool, args)
    assert not result.is_error, (tool, args, result.structured_content)
    return result.structured_content


async def test_reticle_agrees_with_klayout(reticle_bin, server_env, tmp_path):
    layouts = write_gdstk(tmp_path) + write_klayout(tmp_path)
    server_env["RETICLE_ALLOWED_ROOTS"] = str(tmp_path)
    server_env["KLAYOUT_MCP_ARTIFACT_ROOT"] = str(tmp_path / "artifacts")
    checked = 0
    with anyio.fail_after(120):
        async with Client(params(reticle_bin, server_env), mode="legacy") as client:
            for path in layouts:
                want = klayout_facts(path)
                opened = await call(client, "open_layout", {"path": str(path)})
                sid = opened["session_id"]
                assert opened["top_cells"] == want["tops"], path
                assert opened["selected_top_cell"] == want["tops"][0], path
                assert math.isclose(opened["dbu"], want["dbu"]), path
                top = want["cells"][want["tops"][0]]
                assert as_box(opened["bbox_um"]) == top["bbox"], (path, opened["bbox_um"], top)

                cells = await call(client, "list_cells", {"session_id": sid})
                got_cells = {c["name"]: c for c in cells["cells"]}
                assert sorted(got_cells) == sorted(want["cells"]), path
                assert [c["name"] for c in cells["cells"]] == sorted(got_cells), "sorted by name"
                for name, facts in want["cells"].items():
                    got = got_cells[name]
                    assert as_box(got["bbox_um"]) == facts["bbox"], (path, name, got, facts)
                    assert got["is_top"] == facts["is_top"], (path, name)
                    assert got["shape_count"] == facts["shapes"], (path, name, got, facts)
                    assert got["child_instance_count"] == facts["instances"], (path, name, got, facts)

                layers = await call(client, "list_layers", {"session_id": sid})
                got_layers = [(l["layer"], l["datatype"], l["shape_count"]) for l in layers["layers"]]
                assert got_layers == want["layers"], (path, got_layers, want["layers"])
                assert opened["layer_count"] == len(want["layers"]), path
                await call(client, "close_session", {"session_id": sid})
                checked += 1
    assert checked == 4


async def test_observer_tools_match_their_output_schemas(reticle_bin, server_env, tmp_path):
    """One successful call of every observer tool: the SDK validates each structuredContent
    against the tool's outputSchema."""
    server_env["KLAYOUT_MCP_ARTIFACT_ROOT"] = str(tmp_path / "artifacts")
    layout = server_env["RETICLE_ALLOWED_ROOTS"] + "/layouts/observer_demo.gds"
    deck = server_env["RETICLE_ALLOWED_ROOTS"] + "/decks/width_space.drc"
    box = {"left": 0.0, "bottom": -1.0, "right": 41.0, "top": 9.0}
    with anyio.fail_after(120):
        async with Client(params(reticle_bin, server_env), mode="auto") as client:
            opened = await call(client, "open_layout", {"path": layout})
            sid = opened["session_id"]
            await call(client, "list_cells", {"session_id": sid, "max_depth": 2})
            await call(client, "describe_cell", {"session_id": sid, "cell": "TOP", "depth": 2})
            await call(client, "list_layers", {"session_id": sid})
            q = await call(client, "query_region", {"session_id": sid, "box": box, "layers": [{"layer": 1, "datatype": 0}]})
            path_id = next(s["id"] for s in q["shapes"] if s["kind"] == "path")
            await call(client, "measure_geometry", {"session_id": sid, "mode": "path_width", "target_ids": [path_id]})
            await call(client, "analyze_waveguide", {"session_id": sid, "target_id": path_id})
            await call(client, "set_view", {"session_id": sid, "box": box})
            await call(client, "render_view", {"session_id": sid, "style": "dark", "image_size": {"width": 300, "height": 100}})
            run = await call(client, "run_drc_script", {"session_id": sid, "script_path": deck, "params": {"WG_MIN_SPACE": "0.3"}})
            assert run["marker_count"] == 2, run
            markers = await call(client, "extract_markers", {"session_id": sid, "run_id": run["run_id"], "include_crops": True})
            assert all(m["crop"]["path"].endswith(".png") for m in markers["markers"])
            closed = await call(client, "close_session", {"session_id": sid})
            assert closed["closed"] is True
