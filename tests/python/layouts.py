"""Layouts the whole-layout tests build from the real 45 nm GDS (gdstk writes them).

- `gcd_with_injected`: gcd_45nm plus shapes that break the nangate45 M1 rules across the
  tile grid (a long narrow wire over many tiles, wires too close across a tile edge, small
  squares on tile corners, a diagonal wire, a narrow wire along a tile edge), placed right
  of the design so they do not touch its shapes.
- `gcd_array`: an n × n array of gcd_45nm (a reference, not a copy: the file stays small,
  the flattened layout is n² times larger).
"""

import math
import os
import pathlib

import gdstk

ROOT = pathlib.Path(__file__).resolve().parents[2]
M1 = {"layer": 11, "datatype": 0}


def gcd_path() -> pathlib.Path:
    data = pathlib.Path(os.environ.get("RETICLE_DATA_DIR", ROOT.parent / "shared" / "data"))
    path = data / "gds" / "gcd_45nm.gds"
    if not path.exists():
        raise FileNotFoundError(
            f"{path} is missing: the whole-layout tests need the reference data "
            "(set RETICLE_DATA_DIR to the folder holding gds/gcd_45nm.gds)"
        )
    return path


# Core side (µm) of the whole-layout tiles at 4 and 8 nm pixels for the default model: the
# 2048 nm period minus a 432 nm halo (3·λ/NA rounded up to whole pixels) on each side
# (docs/DECISIONS.md D56). Cores are anchored at the layout origin, so core edges sit on
# multiples of it. At 1 nm pixels the halo is 429 nm and the core 1.190 µm: the shapes
# then straddle edges a few nm off, which changes nothing in what they violate.
CORE_UM = 1.184


def _rect(x0, y0, x1, y1):
    return gdstk.rectangle((x0, y0), (x1, y1), **M1)


def injected_shapes(core_um: float = CORE_UM):
    """Shapes (µm) right of gcd's extent (x > 33 µm) that violate width, space and area
    across the tile grid of core side `core_um` (core edges at multiples of it).

    KLayout (Euclidean, `transparent`, the deck's 65 nm width/space and 6500 nm² area)
    finds 8 width, 2 space and 2 area violations on them."""
    c = core_um
    k = math.ceil(33.0 / c)  # first core column right of gcd (which ends at 31.73 µm)
    x0 = k * c

    def row(m: float) -> float:
        return m * c

    shapes = [
        # A 50 nm wide wire over six cores (7 µm, longer than a 2.048 µm window): one width
        # violation; the mask-rule box of each tile it crosses must grow to see its ends.
        _rect(x0 + 0.1, row(5) + 0.3, x0 + 6 * c - 0.1, row(5) + 0.35),
        # Two wires 40 nm apart whose gap straddles the core edge x = (k+2)·c: one space.
        _rect(x0 + 0.8, row(8) + 0.2, x0 + 2 * c - 0.02, row(8) + 0.4),
        _rect(x0 + 2 * c + 0.02, row(8) + 0.2, x0 + 3 * c + 0.5, row(8) + 0.4),
        # A 60 × 60 nm square centred on a core corner, and one centred on a core edge:
        # two width violations (one per direction) and one area violation each.
        _rect(x0 + c - 0.03, row(11) - 0.03, x0 + c + 0.03, row(11) + 0.03),
        _rect(x0 + 3 * c - 0.03, row(11) + 0.5, x0 + 3 * c + 0.03, row(11) + 0.56),
        # A 50 nm wire centred on the core edge y = 13·c, over three cores: one width.
        _rect(x0 + 0.3, row(13) - 0.025, x0 + 3 * c + 0.1, row(13) + 0.025),
        # A vertical wire 55 nm wide crossing three rows of cores: one width.
        _rect(x0 + 5 * c + 0.1, row(15) - 0.4, x0 + 5 * c + 0.155, row(18) + 0.3),
        # An L of 90 nm arms (legal) with a 30 nm gap to a neighbour: one space.
        _rect(x0 + 0.05, row(20) + 0.2, x0 + 0.14, row(20) + 1.2),
        _rect(x0 + 0.05, row(20) + 0.2, x0 + 1.05, row(20) + 0.29),
        _rect(x0 + 0.17, row(20) + 0.4, x0 + 0.35, row(20) + 1.0),
    ]
    # A diagonal 45° wire 50 nm wide (its width along the normal) whose centre line passes
    # through the core corner ((k+2)·c, 23·c): one width violation.
    d = 0.05 / 2 ** 0.5
    cx, cy = x0 + 2 * c - d / 2, row(23) + d / 2
    shapes.append(
        gdstk.Polygon(
            [(cx - 1.0, cy - 1.0), (cx - 1.0 + d, cy - 1.0 - d), (cx + 1.0 + d, cy + 1.0 - d),
             (cx + 1.0, cy + 1.0)],
            **M1,
        )
    )
    return shapes


def gcd_with_injected(out: pathlib.Path, core_um: float = CORE_UM) -> pathlib.Path:
    lib = gdstk.read_gds(str(gcd_path()))
    top = lib.top_level()[0]
    for shape in injected_shapes(core_um):
        top.add(shape)
    # GDSII allows 8190 vertices a polygon; gdstk splits at 199 unless told, which would
    # change the design (gcd has rails of several hundred vertices).
    lib.write_gds(str(out), max_points=8190)
    return out


def gcd_array(out: pathlib.Path, n: int = 4, gap_um: float = 0.1) -> pathlib.Path:
    """n × n copies of gcd, `gap_um` apart bounding box to bounding box (0.1 µm: more than
    the 65 nm space rule, so no violation between copies, and the array's layer box is
    within 1 % of n² times gcd's area)."""
    src = gdstk.read_gds(str(gcd_path()))
    cell = src.top_level()[0]
    (x0, y0), (x1, y1) = cell.bounding_box()
    pitch = (round(x1 - x0 + gap_um, 4), round(y1 - y0 + gap_um, 4))
    lib = gdstk.Library(unit=src.unit, precision=src.precision)
    lib.add(cell)
    top = gdstk.Cell(f"ARRAY{n}")
    top.add(gdstk.Reference(cell, (0, 0), columns=n, rows=n, spacing=pitch))
    lib.add(top)
    # GDSII allows 8190 vertices a polygon; gdstk splits at 199 unless told, which would
    # change the design (gcd has rails of several hundred vertices).
    lib.write_gds(str(out), max_points=8190)
    return out
