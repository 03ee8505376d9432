# KLayout as the oracle for our OASIS writer: for each pair SOURCE,WRITTEN (any formats
# KLayout reads), reads both with KLayout and reports, as JSON, whether KLayout could read
# the written file, the cell names and instance counts of both, their top cells, and per
# (layer, datatype) of every top cell the polygon count of the XOR of the flattened
# regions (0 = identical geometry) plus the text count of each side.
# Run: klayout -b -r compare_oasis.py -rd pairs="SRC,OUT;SRC,OUT" -rd outfile=FILE.json
import json

import pya


def load(path):
    ly = pya.Layout()
    ly.read(path)
    return ly


def facts(ly):
    cells = sorted(ly.cell(i).name for i in range(ly.cells()))
    insts = sum(ly.cell(i).child_instances() for i in range(ly.cells()))
    placements = 0
    for i in range(ly.cells()):
        for inst in ly.cell(i).each_inst():
            placements += inst.size()
    tops = sorted(c.name for c in ly.top_cells())
    return {"cells": cells, "instances": insts, "placements": placements, "tops": tops}


def layer_keys(ly):
    return {(ly.get_info(i).layer, ly.get_info(i).datatype): i for i in ly.layer_indexes()}


def region(ly, cell, idx):
    if idx is None:
        return pya.Region()
    return pya.Region(cell.begin_shapes_rec(idx))


def texts(ly, cell, idx):
    if idx is None:
        return 0
    n = 0
    it = cell.begin_shapes_rec(idx)
    while not it.at_end():
        if it.shape().is_text():
            n += 1
        it.next()
    return n


result = {}
for pair in pairs.split(";"):
    src_path, out_path = pair.split(",")
    entry = {}
    try:
        src = load(src_path)
        out = load(out_path)
    except Exception as e:  # report, do not crash: the Rust test prints it
        entry["error"] = str(e)
        result[out_path] = entry
        continue
    entry["source"] = facts(src)
    entry["written"] = facts(out)
    ks, ko = layer_keys(src), layer_keys(out)
    xor = {}
    for top in src.top_cells():
        other = out.cell(top.name)
        if other is None:
            entry.setdefault("missing_tops", []).append(top.name)
            continue
        for key in sorted(set(ks) | set(ko)):
            a = region(src, top, ks.get(key))
            b = region(out, other, ko.get(key))
            name = "%s:%d/%d" % (top.name, key[0], key[1])
            xor[name] = {
                "xor": (a ^ b).count(),
                "source_polygons": a.count(),
                "source_texts": texts(src, top, ks.get(key)),
                "written_texts": texts(out, other, ko.get(key)),
            }
    entry["layers"] = xor
    result[out_path] = entry

with open(outfile, "w") as f:
    json.dump(result, f, indent=1, sort_keys=True)
