# KLayout as the oracle for write_back (issue 28 item 4): for each case
# SRC|OUT|MASKS|TOP|TL/TD|ML/MD|BL/BD|L,B,R,T (cases joined by ";"), reads the input SRC,
# the written OUT and MASKS (the mask polygons on ML/MD in any cell) and reports, as JSON:
# - per (layer, datatype) of SRC and OUT other than the mask layer, for every top cell of
#   SRC, the polygon count of the XOR of the flattened regions (0 = unchanged);
# - for TOP: the XOR of the mask layer and the base layer BL/BD of SRC outside the box
#   (0 = the drawn shapes, or the earlier mask, outside), the XOR of the mask layer and
#   MASKS inside the box (0 = the given mask), and of the mask layer and the target inside
#   the box (not 0: the test can tell mask from target);
# - the instances of each SRC cell that OUT lost or changed (child name + transformation),
#   and the mask layer's shapes held by TOP itself against its flattened count.
# Run: klayout -b -r writeback_check.py -rd cases="..." -rd outfile=FILE.json
import json

import pya


def load(path):
    ly = pya.Layout()
    ly.read(path)
    return ly


def layer_keys(ly):
    return {(ly.get_info(i).layer, ly.get_info(i).datatype): i for i in ly.layer_indexes()}


def region(cell, idx):
    if idx is None or cell is None:
        return pya.Region()
    return pya.Region(cell.begin_shapes_rec(idx))


def key(text):
    a, b = text.split("/")
    return (int(a), int(b))


def instances(ly, cell):
    out = []
    for inst in cell.each_inst():
        arr = ""
        if inst.is_regular_array():
            arr = " [%s*%d; %s*%d]" % (inst.a, inst.na, inst.b, inst.nb)
        out.append("%s %s%s" % (ly.cell(inst.cell_index).name, inst.cplx_trans, arr))
    return sorted(out)


def polygons(r):
    return r.merged().count()


result = {}
for case in cases.split(";"):
    src_path, out_path, mask_path, top, tl, ml, bl, box = case.split("|")
    entry = {}
    try:
        src, out, masks = load(src_path), load(out_path), load(mask_path)
    except Exception as e:  # report, do not crash: the Rust test prints it
        entry["error"] = str(e)
        result[out_path] = entry
        continue
    target, mask, base = key(tl), key(ml), key(bl)
    l, b, r, t = (int(v) for v in box.split(","))
    ks, ko, km = layer_keys(src), layer_keys(out), layer_keys(masks)
    entry["tops_source"] = sorted(c.name for c in src.top_cells())
    entry["tops_written"] = sorted(c.name for c in out.top_cells())
    unchanged = {}
    for top_cell in src.top_cells():
        other = out.cell(top_cell.name)
        for k in sorted(set(ks) | set(ko)):
            if k == mask:
                continue
            a = region(top_cell, ks.get(k))
            w = region(other, ko.get(k))
            unchanged["%s:%d/%d" % (top_cell.name, k[0], k[1])] = {
                "xor": (a ^ w).count(),
                "source_polygons": a.count(),
            }
    entry["layers"] = unchanged
    boxr = pya.Region(pya.Box(l, b, r, t))
    src_top, out_top = src.cell(top), out.cell(top)
    got = region(out_top, ko.get(mask))
    want_out = region(src_top, ks.get(base)) - boxr
    got_out = got - boxr
    entry["outside_xor"] = (got_out ^ want_out).count()
    entry["outside_polygons"] = polygons(want_out)
    given = pya.Region()
    for c in masks.top_cells():
        given += region(c, km.get(mask))
    given_in = given & boxr
    got_in = got & boxr
    entry["inside_xor"] = (got_in ^ given_in).count()
    entry["inside_polygons"] = polygons(given_in)
    entry["inside_target_xor"] = (got_in ^ (region(src_top, ks.get(target)) & boxr)).count()
    entry["inside_holes"] = sum(p.holes() for p in got_in.merged().each())
    lost = []
    for i in range(src.cells()):
        c = src.cell(i)
        o = out.cell(c.name)
        if o is None:
            lost.append(c.name)
            continue
        names = set(src.cell(j).name for j in range(src.cells()))
        kept = [s for s in instances(out, o) if s.split(" ")[0] in names]
        if kept != instances(src, c):
            lost.append(c.name)
    entry["cells_with_changed_instances"] = lost
    entry["cells_source"] = src.cells()
    entry["cells_written"] = out.cells()
    mi = ko.get(mask)
    entry["top_own_mask_shapes"] = out_top.shapes(mi).size() if mi is not None else 0
    entry["top_flat_mask_shapes"] = (
        pya.Region(out_top.begin_shapes_rec(mi)).count() if mi is not None else 0
    )
    result[out_path] = entry

with open(outfile, "w") as f:
    json.dump(result, f, indent=1, sort_keys=True)
