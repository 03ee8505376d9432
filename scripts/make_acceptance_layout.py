"""Writes fixtures/layouts/acceptance_100x4tiles.gds, the layout of seed 000's falsifiable
acceptance fixture (fixtures/mcp_acceptance/100x4tiles_12collisions.json, D47).

Evaluated on the clip [0, 2.048] um square with 1024 nm report tiles (4 tiles) and the deck
fixtures/decks/acceptance_width.json (one mask width rule, 40 nm, dedup radius 100 nm),
every bar below is one width violation (30 nm wide). Bars of a row or column are 90 nm
apart (centre to centre), so each row is one violation group (single linkage within the
radius); rows are more than 100 nm apart, so there are 12 groups. Bars that cross a tile
border are reported once per tile they touch (D24): 100 records in all, 12 canonical and
88 shadows.

    group  bars  where                                   records
    G1     4     vertical, crossing y = 1024             8
    G2     4     vertical, crossing y = 1024             8
    G3     3     vertical, crossing y = 1024, the middle
                 one also x = 1024 (4 tiles)             8
    G4     4     horizontal, crossing x = 1024           8
    G5     4     horizontal, crossing x = 1024           8
    A-D    9     vertical, inside one tile each          4 x 9
    E-G    8     vertical, inside one tile each          3 x 8

Run with a Python that has gdstk (the test venv):
    python scripts/make_acceptance_layout.py
"""

import pathlib

import gdstk

root = pathlib.Path(__file__).resolve().parent.parent
out = root / "fixtures" / "layouts" / "acceptance_100x4tiles.gds"

NM = 1e-3  # user unit is 1 um


def vbar(cx, cy):
    """30 nm wide, 60 nm tall bar centred at (cx, cy) nm."""
    return gdstk.rectangle(((cx - 15) * NM, (cy - 30) * NM), ((cx + 15) * NM, (cy + 30) * NM), layer=1)


def hbar(cx, cy):
    """60 nm wide, 30 nm tall bar centred at (cx, cy) nm."""
    return gdstk.rectangle(((cx - 30) * NM, (cy - 15) * NM), ((cx + 30) * NM, (cy + 15) * NM), layer=1)


def row(x0, cy, n):
    return [vbar(x0 + 90 * k, cy) for k in range(n)]


def column(cx, y0, n):
    return [hbar(cx, y0 + 90 * k) for k in range(n)]


shapes = []
shapes += row(100, 1024, 4)  # G1
shapes += row(1300, 1024, 4)  # G2
shapes += row(934, 1024, 3)  # G3 (middle bar at x = 1024)
shapes += column(1024, 200, 4)  # G4
shapes += column(1024, 1500, 4)  # G5
shapes += row(60, 150, 9)  # A
shapes += row(60, 600, 9)  # B
shapes += row(1200, 150, 9)  # C
shapes += row(1200, 600, 9)  # D
shapes += row(60, 1400, 8)  # E
shapes += row(60, 1850, 8)  # F
shapes += row(1200, 1300, 8)  # G
assert len(shapes) == 19 + 4 * 9 + 3 * 8

lib = gdstk.Library(name="ACCEPTANCE", unit=1e-6, precision=1e-9)
top = lib.new_cell("TOP")
top.add(*shapes)
lib.write_gds(str(out), timestamp=__import__("datetime").datetime(2000, 1, 1))
print(f"wrote {out} ({len(shapes)} bars)")
