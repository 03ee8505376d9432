# Reference facts for the observer queries (reticle_layout::observe), computed by KLayout on
# layouts written by make_reference.py: per cell (sorted by name) its box, top flag, instance
# records and own shape count; per layer (sorted) the flattened shape count under TOP and the
# number of shapes the recursive iterator finds touching each query box.
# Run: klayout -b -r observe_reference.py -rd outdir=DIR -rd inputs=F1,F2 -rd boxes=l,b,r,t;l,b,r,t
import json
import os

import pya

outdir = globals().get("outdir")
files = [f for f in (globals().get("inputs") or "").split(",") if f]
boxes = [[int(v) for v in b.split(",")] for b in (globals().get("boxes") or "").split(";") if b]

out = {}
for path in files:
    ly = pya.Layout()
    ly.read(path)
    tops = set(c.cell_index() for c in ly.top_cells())
    cells = []
    for c in sorted(ly.each_cell(), key=lambda c: c.name):
        b = c.bbox()
        cells.append({
            "name": c.name,
            "is_top": c.cell_index() in tops,
            "bbox": None if b.empty() else [b.left, b.bottom, b.right, b.top],
            "child_instances": c.child_instances(),
            "shape_count": sum(c.shapes(li).size() for li in ly.layer_indexes()),
        })
    top = ly.cell("TOP")
    layers = []
    for li in ly.layer_indexes():
        info = ly.get_info(li)
        count = 0
        it = top.begin_shapes_rec(li)
        while not it.at_end():
            count += 1
            it.next()
        touching = []
        for bx in boxes:
            n = 0
            it = top.begin_shapes_rec_touching(li, pya.Box(*bx))
            while not it.at_end():
                n += 1
                it.next()
            touching.append(n)
        layers.append({"layer": info.layer, "datatype": info.datatype, "count": count,
                       "touching": touching})
    layers.sort(key=lambda l: (l["layer"], l["datatype"]))
    out[os.path.basename(path)] = {"cells": cells, "layers": layers}

with open(os.path.join(outdir, "observe_reference.json"), "w") as f:
    json.dump(out, f, indent=1, sort_keys=True)
