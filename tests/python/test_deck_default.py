"""`evaluate` without `deck` (issue 28 item 7, D185): the shipped deck whose layers the
layout has; none or several fitting is a typed error listing the candidates.

What fits is computed here from the shipped deck files and gdstk's reading of the layout
(code that shares nothing with the host's), then compared with what the host answers,
through the Python MCP SDK.
"""

import json
import os
import pathlib

import gdstk
import pytest
from mcp import Client, StdioServerParameters

from conftest import ROOT
from layouts import gcd_path
from wholelayout import release_bin  # noqa: F401 (fixture)

DECKS = {
    name: json.loads((ROOT / "fixtures" / "decks" / f"{name}.json").read_text())
    for name in ("iccad13_m1", "nangate45_m1v1", "nangate45_m1_litho")
}
WINDOW = [6.0, 6.0, 8.048, 8.048]


def fitting_gds(path: pathlib.Path) -> list[str]:
    lib = gdstk.read_gds(str(path))
    have = {f"{p.layer}/{p.datatype}" for c in lib.cells for p in c.polygons}
    have |= {f"{p.layer}/{p.datatype}" for c in lib.cells for p in c.paths for p in p.to_polygons()}
    return sorted(n for n, d in DECKS.items() if set(d["layers"].values()) <= have)


def only_metal1(out: pathlib.Path) -> pathlib.Path:
    lib = gdstk.read_gds(str(gcd_path()))
    (top,) = lib.top_level()
    flat = gdstk.Cell("TOP")
    for p in top.get_polygons(layer=11, datatype=0):
        flat.add(p)
    new = gdstk.Library()
    new.add(flat)
    new.write_gds(str(out))
    return out


@pytest.mark.anyio
async def test_the_one_fitting_shipped_deck_is_used_and_several_are_listed(release_bin, tmp_path):  # noqa: F811
    env = dict(os.environ)
    env["RETICLE_ALLOWED_ROOTS"] = f"{tmp_path}:{gcd_path().parent}:{ROOT / 'fixtures'}"
    env["RETICLE_BACKEND"] = "cpu"
    env["KLAYOUT_MCP_ARTIFACT_ROOT"] = str(tmp_path / "artifacts")
    env["RETICLE_LOG_DIR"] = str(tmp_path / "logs")
    m1 = only_metal1(tmp_path / "m1_only.gds")
    assert fitting_gds(m1) == ["nangate45_m1_litho"]
    params = StdioServerParameters(command=release_bin, args=["serve"], env=env)
    async with Client(params, read_timeout_seconds=600) as client:
        one = await client.call_tool(
            "evaluate",
            {"layout": str(m1), "box_um": WINDOW, "pixel_nm": 4, "wait": True, "render": "json"},
        )
        assert not one.is_error, one.structured_content
        assert one.structured_content["deck"]["source"] == "shipped:nangate45_m1_litho"

        gcd = gcd_path()
        expected = fitting_gds(gcd)
        r = await client.call_tool(
            "evaluate",
            {"layout": str(gcd), "box_um": WINDOW, "pixel_nm": 4, "wait": True, "render": "json"},
        )
        if len(expected) == 1:
            assert not r.is_error and r.structured_content["deck"]["source"] == f"shipped:{expected[0]}"
        else:
            assert r.is_error, r.structured_content
            error = r.structured_content["error"]
            assert error["code"] == "INVALID_INPUT", error
            assert error["details"]["fitting"] == expected, error
            listed = {c["deck"] for c in error["details"]["shipped_decks"]}
            assert listed == set(DECKS), error

        # A .glp clip offers level names: every deck whose layer names are all levels fits.
        glp = ROOT / "fixtures" / "layouts" / "lines_and_pad.glp"
        levels = {line.split()[1] for line in glp.read_text().splitlines() if line.startswith("LEVEL")}
        fits = sorted(n for n, d in DECKS.items() if set(d["layers"]) <= levels)
        r = await client.call_tool("evaluate", {"layout": str(glp), "wait": True, "render": "json"})
        if len(fits) == 1:
            assert not r.is_error and r.structured_content["deck"]["source"] == f"shipped:{fits[0]}"
        else:
            assert r.is_error and r.structured_content["error"]["details"]["fitting"] == fits, r
