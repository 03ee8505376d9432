# Builds a test layout with KLayout, writes it as GDS and OASIS (plain and CBLOCK-compressed
# with repetitions), then re-reads each file with KLayout and records reference facts as JSON:
# cells, top cells, and per (layer, datatype) of the flattened top cell: shape count, summed
# polygon area (dbu^2) and bounding box. Run: klayout -b -r make_reference.py -rd outdir=DIR [-rd extra=FILE,FILE]
import json
import math
import os

import pya

outdir = globals().get("outdir") or os.environ["OUTDIR"]

ly = pya.Layout()
ly.dbu = 0.001
L = lambda l, d=0: ly.layer(l, d)

leaf = ly.create_cell("LEAF")
leaf.shapes(L(1)).insert(pya.Box(0, 0, 100, 50))
leaf.shapes(L(2, 5)).insert(pya.Polygon([pya.Point(0, 0), pya.Point(200, 0), pya.Point(200, 100),
                                         pya.Point(100, 100), pya.Point(100, 200), pya.Point(0, 200)]))
leaf.shapes(L(3)).insert(pya.Path([pya.Point(0, 0), pya.Point(1000, 0), pya.Point(1000, 500)], 60, 20, 40))
leaf.shapes(L(3, 1)).insert(pya.Path([pya.Point(0, 0), pya.Point(0, 400)], 40, 20, 20))
leaf.shapes(L(3, 2)).insert(pya.Path([pya.Point(0, 0), pya.Point(300, 300)], 40, 0, 0))
leaf.shapes(L(4)).insert(pya.Path([pya.Point(0, 0), pya.Point(600, 0)], 100, 50, 50, True))
leaf.shapes(L(10)).insert(pya.Text("PIN_A", pya.Trans(pya.Point(5, 5))))

mid = ly.create_cell("MID")
mid.insert(pya.CellInstArray(leaf.cell_index(), pya.Trans(pya.Trans.M0, pya.Vector(500, 0))))
mid.shapes(L(1)).insert(pya.Box(-50, -50, 0, 0))
# a shape array (OASIS writes it as a repetition)
for i in range(5):
    for j in range(3):
        mid.shapes(L(5)).insert(pya.Box(i * 300, 2000 + j * 400, i * 300 + 100, 2000 + j * 400 + 150))

top = ly.create_cell("TOP")
CI = leaf.cell_index()
top.insert(pya.CellInstArray(CI, pya.Trans(pya.Trans.R90, pya.Vector(10000, 0))))
top.insert(pya.CellInstArray(CI, pya.Trans(pya.Trans.M45, pya.Vector(0, 10000))))
top.insert(pya.CellInstArray(CI, pya.Trans(pya.Trans.R270, pya.Vector(-7000, 3000))))
top.insert(pya.CellInstArray(CI, pya.ICplxTrans(2.0, 180, False, pya.Vector(0, 0))))
top.insert(pya.CellInstArray(CI, pya.ICplxTrans(1.5, 30, False, pya.Vector(-20000, -20000))))
top.insert(pya.CellInstArray(CI, pya.ICplxTrans(1.0, 45, True, pya.Vector(30000, -20000))))
top.insert(pya.CellInstArray(mid.cell_index(), pya.Trans(pya.Trans.R90, pya.Vector(50000, 0))))
top.insert(pya.CellInstArray(CI, pya.Trans(pya.Vector(100000, 100000)),
                             pya.Vector(2000, 0), pya.Vector(0, 3000), 4, 3))
top.insert(pya.CellInstArray(mid.cell_index(), pya.Trans(pya.Trans.R180, pya.Vector(-100000, 100000)),
                             pya.Vector(5000, 1000), pya.Vector(-1000, 6000), 3, 2))
# an unreferenced second top cell
other = ly.create_cell("AAA_OTHER")
other.shapes(L(7)).insert(pya.Box(0, 0, 10, 10))


def facts(path):
    rl = pya.Layout()
    rl.read(path)
    t = rl.cell("TOP")
    layers = {}
    for li in rl.layer_indexes():
        info = rl.get_info(li)
        it = t.begin_shapes_rec(li)
        count, area, texts = 0, 0, 0
        while not it.at_end():
            s = it.shape()
            count += 1
            if s.is_text():
                texts += 1
            else:
                area += s.polygon.transformed(it.trans()).area()
            it.next()
        if count == 0:
            continue
        b = t.bbox_per_layer(li)
        layers["%d/%d" % (info.layer, info.datatype)] = {
            "count": count, "texts": texts, "area": area,
            "bbox": [b.left, b.bottom, b.right, b.top],
        }
    return {
        "dbu": rl.dbu,
        "cells": sorted(c.name for c in rl.each_cell()),
        "top_cells": sorted(c.name for c in rl.top_cells()),
        "layers": layers,
    }


out = {}
gds = os.path.join(outdir, "sample.gds")
ly.write(gds)
out["sample.gds"] = facts(gds)
oas = os.path.join(outdir, "sample.oas")
opt = pya.SaveLayoutOptions()
opt.format = "OASIS"
opt.oasis_compression_level = 0
opt.oasis_write_cblocks = False
opt.oasis_strict_mode = False
ly.write(oas, opt)
out["sample.oas"] = facts(oas)
oasz = os.path.join(outdir, "sample_cblocks.oas")
opt = pya.SaveLayoutOptions()
opt.format = "OASIS"
opt.oasis_compression_level = 10
opt.oasis_write_cblocks = True
opt.oasis_strict_mode = True
ly.write(oasz, opt)
out["sample_cblocks.oas"] = facts(oasz)

# Files written by the tests themselves (e.g. the hand-made every-record OASIS file).
for extra in filter(None, (globals().get("extra") or "").split(",")):
    out[os.path.basename(extra)] = facts(extra)

real = os.environ.get("RETICLE_REAL_GDS")
if real and os.path.exists(real):
    rl = pya.Layout()
    rl.read(real)
    t = rl.top_cells()[0]
    layers = {}
    for li in rl.layer_indexes():
        info = rl.get_info(li)
        it = t.begin_shapes_rec(li)
        count, area = 0, 0
        while not it.at_end():
            s = it.shape()
            count += 1
            if not s.is_text():
                area += s.polygon.transformed(it.trans()).area()
            it.next()
        layers["%d/%d" % (info.layer, info.datatype)] = {"count": count, "area": area}
    out["real"] = {"cells": rl.cells(), "top": t.name, "layers": layers}

with open(os.path.join(outdir, "reference.json"), "w") as f:
    json.dump(out, f, indent=1, sort_keys=True)
