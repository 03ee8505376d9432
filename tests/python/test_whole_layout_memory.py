"""Whole-layout evaluation runs in bounded memory (issue 18): a layout 16 times larger
(a 4 × 4 array of gcd_45nm, about 120 µm square) needs no more resident memory, in the
`reticle` host or in any `reticle-worker`, than gcd alone (within 10 %).

The workers' bound is checked on the exact peak: the `ru_maxrss` that `wait4` returns for
the `reticle` process (through a small launcher, see `LAUNCHER`), which the kernel takes
over it and every descendant it reaped (its workers), so no short peak escapes. Sampling
cannot give that: a worker's largest moment can be the last few milliseconds of the run
(the merge), and whether a 50 ms sampler caught it made the single gcd's figure bimodal
(21 or 25 MiB) while its true peak was 25.1–25.5 MiB in every run (D222). The host's own peak, and the per-process view printed
beside it, are still sampled from /proc every ~50 ms while the run lasts: VmRSS of the
`reticle` process and of every descendant (found through the ppid links of /proc/*/stat),
with VmHWM (the kernel's own high-water mark) as a cross-check.
"""

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

from layouts import gcd_array, gcd_path
from wholelayout import (
    assert_box_equal,
    data_dir,
    eval_env,
    layer_box_nm,
    layer_polygons,
    release_bin,  # noqa: F401 (fixture)
)

SAMPLE_S = 0.05
# The kernel counts a process's resident pages in per-CPU counters (mm's percpu_counter,
# batch max(32, 2 × CPUs)), so /proc's VmRSS and the high-water mark wait4 reports can each
# be off by up to batch × CPUs pages: two of them may differ by twice that. Measured in CI:
# wait4 25,880 KiB against 25,984 KiB sampled from /proc for the same worker.
_CPUS = os.cpu_count() or 1
RSS_COUNTER_SLACK_KIB = 2 * max(32, 2 * _CPUS) * _CPUS * os.sysconf("SC_PAGE_SIZE") // 1024
TOLERANCE = 0.10  # the array's peaks may exceed the single gcd's by 10 % at most


def _status_kib(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (KiB) of a live process; {} once it is gone or a zombie."""
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    key, value = line.split(":", 1)
                    out[key] = int(value.split()[0])
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return {}
    return out


def _comm_ppid(pid: str) -> tuple[str, int] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # comm is in parentheses and may hold spaces or parentheses: split at the last ')'.
    head, _, rest = stat.rpartition(")")
    comm = head.split("(", 1)[1] if "(" in head else "?"
    fields = rest.split()
    return comm, int(fields[1])


def descendants(root: int) -> dict[int, str]:
    """Every live descendant of `root`: pid → comm."""
    children: dict[int, list[tuple[int, str]]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        info = _comm_ppid(entry)
        if info is not None:
            children.setdefault(info[1], []).append((int(entry), info[0]))
    found, stack = {}, [root]
    while stack:
        for pid, comm in children.get(stack.pop(), []):
            if pid not in found:
                found[pid] = comm
                stack.append(pid)
    return found


class Peaks:
    def __init__(self):
        self.host_rss = 0
        self.host_hwm = 0
        self.procs: dict[int, dict] = {}  # descendant pid → {comm, rss, hwm}
        self.samples = 0
        self.tree_maxrss = 0  # KiB: wait4's ru_maxrss, the peak of `reticle` and its reaped workers
        self.launcher_maxrss = 0  # KiB: the launcher's VmHWM (what `reticle` was a copy of)

    @property
    def worker_rss(self) -> int:
        return max((p["rss"] for p in self.procs.values()), default=0)

    @property
    def worker_hwm(self) -> int:
        return max((p["hwm"] for p in self.procs.values()), default=0)

    def largest_worker(self) -> str:
        if not self.procs:
            return "none"
        pid, p = max(self.procs.items(), key=lambda kv: kv[1]["rss"])
        return f"{p['comm']} pid {pid}"

    def describe(self) -> str:
        return (
            f"process tree peak (wait4 ru_maxrss) {self.tree_maxrss / 1024:.1f} MiB "
            f"(launcher {self.launcher_maxrss / 1024:.1f}); "
            f"host peak VmRSS {self.host_rss / 1024:.1f} MiB (VmHWM {self.host_hwm / 1024:.1f}); "
            f"worker peak VmRSS {self.worker_rss / 1024:.1f} MiB (VmHWM "
            f"{self.worker_hwm / 1024:.1f}; {self.largest_worker()}); {len(self.procs)} "
            f"descendant(s), {self.samples} samples"
        )


# The launcher between pytest and `reticle`. The kernel's ru_maxrss of a process counts the
# moment between fork and exec, when the child is still a copy of its parent: `reticle`
# started straight from pytest (about 100 MiB with KLayout loaded) would report pytest's
# size. This launcher (`python -I -S`, a few MiB: its own high-water mark, VmHWM, the size
# `reticle` is a copy of before its exec, is written beside the figure and checked to be
# below the workers') starts `reticle` instead and writes what wait4 says of it: the peak
# of `reticle` and of every worker it reaped.
LAUNCHER = """
import os, sys
out, argv = sys.argv[1], sys.argv[2:]
pid = os.posix_spawn(argv[0], argv, os.environ)
_, status, usage = os.wait4(pid, 0)
with open(out, "w") as f:
    hwm = next(l for l in open("/proc/self/status") if l.startswith("VmHWM:")).split()[1]
    f.write(f"{usage.ru_maxrss} {hwm}")
code = os.waitstatus_to_exitcode(status)
sys.exit(code if code >= 0 else 128 - code)
"""


def run_sampled(cmd: list[str], cwd: pathlib.Path, env: dict, timeout_s: float):
    """Runs `cmd`, sampling memory until it exits; (returncode, stdout, stderr, wall, Peaks)."""
    stdout_path, stderr_path = cwd / "stdout.json", cwd / "stderr.txt"
    rusage_path = cwd / "rusage.txt"
    peaks = Peaks()
    start = time.monotonic()
    launcher = [sys.executable, "-I", "-S", "-c", LAUNCHER, str(rusage_path), *cmd]
    with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
        proc = subprocess.Popen(launcher, cwd=cwd, env=env, stdout=out, stderr=err,
                                start_new_session=True)
        try:
            host_pid = None
            while proc.poll() is None:
                if time.monotonic() - start > timeout_s:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                    pytest.fail(f"{' '.join(cmd)} did not finish in {timeout_s} s; {peaks.describe()}")
                below = descendants(proc.pid)
                if host_pid is None:
                    host_pid = next((pid for pid, comm in below.items() if comm == "reticle"), None)
                if host_pid is not None:
                    host = _status_kib(host_pid)
                    peaks.host_rss = max(peaks.host_rss, host.get("VmRSS", 0))
                    peaks.host_hwm = max(peaks.host_hwm, host.get("VmHWM", 0))
                for pid, comm in below.items():
                    if pid == host_pid:
                        continue
                    status = _status_kib(pid)
                    p = peaks.procs.setdefault(pid, {"comm": comm, "rss": 0, "hwm": 0})
                    p["rss"] = max(p["rss"], status.get("VmRSS", 0))
                    p["hwm"] = max(p["hwm"], status.get("VmHWM", 0))
                peaks.samples += 1
                time.sleep(SAMPLE_S)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    wall = time.monotonic() - start
    if proc.returncode == 0:
        peaks.tree_maxrss, peaks.launcher_maxrss = map(int, rusage_path.read_text().split())
    return proc.returncode, stdout_path.read_text(), stderr_path.read_text(), wall, peaks


def evaluate(release_bin: str, gds: pathlib.Path, work: pathlib.Path, roots, timeout_s: float):
    work.mkdir()
    cmd = [release_bin, "eval", "--deck", "nangate45_m1v1", "--layer", "11/0", "--pixel-nm", "4",
           "--workers", "2", "--out", str(work / "out"), str(gds)]
    rc, stdout, stderr, wall, peaks = run_sampled(cmd, work, eval_env(work, roots), timeout_s)
    assert rc == 0, f"{' '.join(cmd)} exited {rc}\n{stdout[-2000:]}\n{stderr[-4000:]}"
    return json.loads(stdout), wall, peaks


def area(box) -> float:
    return (box[2] - box[0]) * (box[3] - box[1])


def test_array_of_16_runs_in_the_memory_of_one(release_bin, tmp_path):  # noqa: F811
    roots = [tmp_path, data_dir()]
    single_gds = gcd_path()
    array_gds = gcd_array(tmp_path / "gcd_4x4.gds", 4)
    single_polygons = layer_polygons(single_gds)
    array_polygons = layer_polygons(array_gds)
    assert len(array_polygons) == 16 * len(single_polygons)

    single, single_wall, single_peaks = evaluate(release_bin, single_gds, tmp_path / "single", roots, 600)
    array, array_wall, array_peaks = evaluate(release_bin, array_gds, tmp_path / "array", roots, 1800)

    print(
        f"\nsingle gcd: {single['imaging']['tiles']} tiles, {single_wall:.1f} s; "
        f"{single_peaks.describe()}"
        f"\n4x4 array:  {array['imaging']['tiles']} tiles, {array_wall:.1f} s; "
        f"{array_peaks.describe()}"
        f"\nratios array/single: host {array_peaks.host_rss / single_peaks.host_rss:.3f}, "
        f"worker (process tree peak) {array_peaks.tree_maxrss / single_peaks.tree_maxrss:.3f}, "
        f"worker (sampled) {array_peaks.worker_rss / single_peaks.worker_rss:.3f}"
    )

    for report, polygons in ((single, single_polygons), (array, array_polygons)):
        assert report["imaging"]["mode"] == "tiled", report["imaging"]
        assert report["region"]["source"] == "layer_bbox", report["region"]
        assert_box_equal(report["region"]["box_nm"], layer_box_nm(polygons))
        assert report["layout"]["polygons_in_window"] == len(polygons), report["layout"]
    # gcd_array leaves 0.1 µm between copies: 16 × the area within 1 %.
    ratio = area(array["region"]["box_nm"]) / area(single["region"]["box_nm"])
    assert 16 <= ratio <= 16 * 1.01, ratio
    assert array["layout"]["polygons_in_window"] == 16 * single["layout"]["polygons_in_window"]

    for peaks in (single_peaks, array_peaks):
        workers = [p for p in peaks.procs.values() if p["comm"].startswith("reticle-worke")]
        assert len(workers) >= 2 and peaks.worker_rss > 0, (
            f"the sampler saw no reticle-worker processes: {peaks.procs}"
        )
    assert array_peaks.host_rss <= (1 + TOLERANCE) * single_peaks.host_rss, (
        f"the host grew with the layout: {array_peaks.host_rss} KiB for 16 × gcd, "
        f"{single_peaks.host_rss} KiB for gcd"
    )
    # The process tree's peak is the largest worker's: it covers every worker the sampler
    # saw, to the kernel counters' precision (so the host reaped its workers before it
    # exited, and their peaks count), and a worker holds more than the host (so the bound
    # below is the workers', not the host's). And it is not the launcher's copy, which is
    # below every worker.
    for peaks in (single_peaks, array_peaks):
        assert peaks.tree_maxrss + RSS_COUNTER_SLACK_KIB >= peaks.worker_rss, (
            f"{peaks.describe()}; slack {RSS_COUNTER_SLACK_KIB} KiB")
        assert peaks.worker_rss > peaks.host_rss, peaks.describe()
        assert peaks.launcher_maxrss < peaks.worker_rss, peaks.describe()
    assert array_peaks.tree_maxrss <= (1 + TOLERANCE) * single_peaks.tree_maxrss, (
        f"a worker grew with the layout: peak {array_peaks.tree_maxrss} KiB for 16 × gcd, "
        f"{single_peaks.tree_maxrss} KiB for gcd ({array_peaks.describe()})"
    )
