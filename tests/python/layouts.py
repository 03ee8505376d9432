"""Layouts the whole-layout tests build from the real 45 nm GDS (gdstk writes them).

- `gcd_with_injected`: gcd_45nm plus shapes that break the nangate45 M1 rules across the
  tile grid (a long narrow wire over many tiles, wires too close across a tile edge, small
  squares on tile corners, a diagonal wire, a narrow wire along a tile edge), placed right
  of the design so they do not touch its shapes.
- `gcd_array`: an n × n array of gcd_45nm (a reference, not a copy: the file stays small,
  the flattened layout is n² times larger).
"""

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


def _rect(x0, y0, x1, y1):
    return gdstk.rectangle((x0, y0), (x1, y1), **M1)


def injected_shapes():
    """Shapes (µm) right of gcd's extent (x > 32 µm) that violate width, space and area;
    tile edges sit on multiples of the 1.024 µm core."""
    c = 1.024
    shapes = [
        # A 50 nm wide wire over six cores: one width violation, longer than any window.
        _rect(33.1, 5 * c + 0.3, 39.3, 5 * c + 0.35),
        # Two wires 40 nm apart whose gap straddles the core edge x = 35c.
        _rect(34.0, 8 * c + 0.2, 35 * c - 0.02, 8 * c + 0.4),
        _rect(35 * c + 0.02, 8 * c + 0.2, 36.5, 8 * c + 0.4),
        # A 60 × 60 nm square centred on a core corner, and one centred on a core edge.
        _rect(34 * c - 0.03, 11 * c - 0.03, 34 * c + 0.03, 11 * c + 0.03),
        _rect(36 * c - 0.03, 12.5, 36 * c + 0.03, 12.56),
        # A 50 nm wire running along the core edge y = 14c, over three cores.
        _rect(33.5, 14 * c - 0.025, 36.8, 14 * c + 0.025),
        # A vertical wire 55 nm wide crossing three rows of cores.
        _rect(38 * c + 0.1, 16.0, 38 * c + 0.155, 19.5),
        # An L of 90 nm arms (legal) with a 30 nm notch-like gap to a neighbour.
        _rect(33.2, 21.0, 33.29, 22.0),
        _rect(33.2, 21.0, 34.2, 21.09),
        _rect(33.32, 21.2, 33.5, 21.8),
    ]
    # A diagonal 45° wire 50 nm wide (its width along the normal) crossing a core corner.
    d = 0.05 / 2 ** 0.5
    shapes.append(
        gdstk.Polygon(
            [(34.5, 25.0), (34.5 + d, 25.0 - d), (36.5 + d, 27.0 - d), (36.5, 27.0)], **M1
        )
    )
    return shapes


def gcd_with_injected(out: pathlib.Path) -> pathlib.Path:
    lib = gdstk.read_gds(str(gcd_path()))
    top = lib.top_level()[0]
    for shape in injected_shapes():
        top.add(shape)
    lib.write_gds(str(out))
    return out


def gcd_array(out: pathlib.Path, n: int = 4) -> pathlib.Path:
    src = gdstk.read_gds(str(gcd_path()))
    cell = src.top_level()[0]
    (x0, y0), (x1, y1) = cell.bounding_box()
    pitch = (round(x1 + 1.0, 3), round(y1 + 1.0, 3))
    lib = gdstk.Library(unit=src.unit, precision=src.precision)
    lib.add(cell)
    top = gdstk.Cell(f"ARRAY{n}")
    top.add(gdstk.Reference(cell, (0, 0), columns=n, rows=n, spacing=pitch))
    lib.add(top)
    lib.write_gds(str(out))
    return out
