"""Helpers of the whole-layout tests (issue 18): the release binary, `reticle eval` runs,
KLayout's counts on the same layout, the layer's box and polygons from gdstk, the heat map.

`reticle eval` with no `--box` evaluates the whole bounding box of the layer in tiles of the
model period; these helpers run it as a user would (the release binary, a fresh process) and
compute what it must find with tools that share no code with it (KLayout, gdstk).
"""

import json
import os
import pathlib
import resource
import shutil
import struct
import subprocess
import time
import xml.etree.ElementTree as ET

import gdstk
import pytest

from conftest import ROOT
from layouts import gcd_path

# The deck's rules on 11/0 and the KLayout category that checks the same thing.
RULE_CATEGORY = {"M1.W": "width", "M1.S": "space", "M1.A": "area"}

# nangate45_m1v1 on 11/0 as a KLayout DRC script: Euclidean metrics, `transparent` (no
# shielding), like kernel/tests/engine/rules_klayout.rs; width on the drawn polygons, space and
# area on the merged layer.
DRC_SCRIPT = """\
source($input)
report("whole", $report)
l = input(11, 0)
l.width({width_um}.um, euclidian, transparent).output("width")
l.merged.space({space_um}.um, euclidian, transparent).output("space")
l.merged.with_area(nil, {area_um2}).output("area")
"""

BUILD_HINT = f"run `cargo build --release --bins` in {ROOT} (about 10 minutes on 2 cores)"


def data_dir() -> pathlib.Path:
    """The reference data folder (holds gds/gcd_45nm.gds); fails the test when absent."""
    try:
        return gcd_path().parent.parent
    except FileNotFoundError as e:
        pytest.fail(str(e))


def _newest_source() -> tuple[float, pathlib.Path | None]:
    newest, which = 0.0, None
    for crate in ("host", "worker", "eval", "kernel", "layout", "protocol", "shaders"):
        for path in (ROOT / crate).rglob("*"):
            if path.suffix in (".rs", ".wgsl", ".json", ".toml") and "target" not in path.parts:
                m = path.stat().st_mtime
                if m > newest:
                    newest, which = m, path
    return newest, which


@pytest.fixture(scope="session")
def release_bin() -> str:
    """`target/release/reticle` (or `RETICLE_RELEASE_BIN`), with `reticle-worker` next to it.

    A missing binary fails the test with the build command. A binary older than the
    sources is used, with a warning printed: the results are those of the binary."""
    path = pathlib.Path(
        os.environ.get("RETICLE_RELEASE_BIN", ROOT / "target" / "release" / "reticle")
    )
    worker = path.with_name("reticle-worker")
    for p in (path, worker):
        if not os.access(p, os.X_OK):
            pytest.fail(f"release binary {p} not found: {BUILD_HINT}")
    newest, which = _newest_source()
    built = min(path.stat().st_mtime, worker.stat().st_mtime)
    if newest > built:
        print(
            f"\nWARNING: {path} is older than {which.relative_to(ROOT)}; the test runs the "
            f"binary as built ({BUILD_HINT} to test the sources)"
        )
    return str(path)


def klayout_bin() -> str:
    klayout = os.environ.get("KLAYOUT_BIN", "klayout")
    found = shutil.which(klayout)
    if found is None:
        pytest.fail(
            f"KLayout ({klayout}) is not installed: it is the reference these tests compare "
            "with; run scripts/setup.sh test (or apt-get install klayout)"
        )
    return found


def klayout_counts(
    gds: pathlib.Path,
    work: pathlib.Path,
    width_nm: float = 65,
    space_nm: float = 65,
    area_nm2: float = 6500,
) -> dict[str, int]:
    """KLayout batch DRC on the whole layout: the number of items per category
    (`width`, `space`, `area`) in its report database."""
    script = work / "whole.drc"
    script.write_text(
        DRC_SCRIPT.format(
            width_um=width_nm / 1000, space_um=space_nm / 1000, area_um2=area_nm2 / 1e6
        )
    )
    report = work / f"{gds.stem}.lyrdb"
    done = subprocess.run(
        [klayout_bin(), "-b", "-r", str(script), "-rd", f"input={gds}", "-rd", f"report={report}"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0 and report.exists(), (
        f"KLayout failed (exit {done.returncode}):\n{done.stdout}\n{done.stderr}"
    )
    root = ET.parse(report).getroot()
    declared = {c.findtext("name") for c in root.iter("category") if c.find("name") is not None}
    assert {"width", "space", "area"} <= declared, f"KLayout report lacks categories: {declared}"
    counts = {"width": 0, "space": 0, "area": 0}
    items = root.find("items")
    for item in items.iter("item") if items is not None else []:
        category = (item.findtext("category") or "").strip().strip("'")
        counts[category] = counts.get(category, 0) + 1
    return counts


def layer_polygons(gds: pathlib.Path, layer: int = 11, datatype: int = 0):
    """The flattened polygons of one layer of the top cell (gdstk)."""
    lib = gdstk.read_gds(str(gds))
    tops = lib.top_level()
    assert len(tops) == 1, f"{gds} has {len(tops)} top cells"
    return tops[0].get_polygons(layer=layer, datatype=datatype)


def layer_box_nm(polygons) -> list[float]:
    """[left, bottom, right, top] in nm of the polygons (gdstk works in µm)."""
    xs = [x for p in polygons for x in p.points[:, 0]]
    ys = [y for p in polygons for y in p.points[:, 1]]
    return [min(xs) * 1000, min(ys) * 1000, max(xs) * 1000, max(ys) * 1000]


def eval_env(tmp_path: pathlib.Path, roots: list[pathlib.Path]) -> dict:
    """Environment of a `reticle eval` run: the CPU engine, logs under the test's tmp dir,
    reads confined to `roots`."""
    env = dict(os.environ)
    env["RETICLE_ALLOWED_ROOTS"] = ":".join(str(r) for r in roots)
    env["RETICLE_LOG_DIR"] = str(tmp_path / "logs")
    env["RETICLE_BACKEND"] = "cpu"
    env.pop("RETICLE_WORKERS", None)
    return env


class EvalRun:
    """One finished `reticle eval` process."""

    def __init__(self, cmd, returncode, stdout, stderr, wall_s, cpu_s):
        self.cmd = cmd
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.wall_s = wall_s
        self.cpu_s = cpu_s

    @property
    def report(self) -> dict:
        assert self.returncode == 0, (
            f"{' '.join(self.cmd)} exited {self.returncode}\nstdout: {self.stdout[-4000:]}\n"
            f"stderr: {self.stderr[-4000:]}"
        )
        try:
            return json.loads(self.stdout)
        except json.JSONDecodeError as e:
            pytest.fail(f"reticle eval printed no JSON report ({e}): {self.stdout[:2000]!r}")


def run_eval(bin_path: str, args: list[str], cwd: pathlib.Path, env: dict, timeout_s: float = 600) -> EvalRun:
    """Runs `reticle eval ARGS` in `cwd`; wall time, and CPU time of the process and the
    workers it reaped (the children's rusage of this process, before and after)."""
    cmd = [bin_path, "eval", *args]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    try:
        done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{' '.join(cmd)} did not finish in {timeout_s} s: {(e.stderr or b'')[-2000:]!r}")
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return EvalRun(cmd, done.returncode, done.stdout, done.stderr, wall, cpu)


def by_rule(report: dict, key: str = "violations") -> dict[str, int]:
    return {r["rule_id"]: r.get(key) for r in report["counts"]["by_rule"]}


def assert_rules_match_klayout(report: dict, klayout: dict[str, int]) -> None:
    rules = {r["rule_id"]: r for r in report["counts"]["by_rule"]}
    for rule_id, category in RULE_CATEGORY.items():
        assert rule_id in rules, f"no {rule_id} in the report: {sorted(rules)}"
        entry = rules[rule_id]
        assert entry["checked"] is True, entry
        assert entry["violations"] == klayout[category], (
            f"{rule_id}: reticle counts {entry['violations']} distinct violations, KLayout "
            f"{klayout[category]} {category} items (reticle by rule: {by_rule(report)}, "
            f"KLayout: {klayout})"
        )


def assert_box_equal(actual_nm, expected_nm, tolerance_nm: float = 1.0) -> None:
    assert len(actual_nm) == 4, actual_nm
    diff = max(abs(a - e) for a, e in zip(actual_nm, expected_nm))
    assert diff <= tolerance_nm, f"region {actual_nm} nm is not the layer's box {expected_nm} nm"


def check_heatmap(report: dict) -> pathlib.Path:
    """The report's heat map exists, is a PNG, and has the size the report gives."""
    heat = report["artifacts"]["heatmap"]
    path = pathlib.Path(heat["png"]["path"])
    assert path.is_file(), f"heat map {path} does not exist"
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG: {data[:8]!r}"
    assert data[12:16] == b"IHDR", f"{path} does not start with IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (heat["width"], heat["height"]), (
        f"{path} is {width}×{height}, the report says {heat['width']}×{heat['height']}"
    )
    if "bytes" in heat["png"]:
        assert len(data) == heat["png"]["bytes"], (len(data), heat["png"])
    return path


def read_jsonl(path: pathlib.Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
