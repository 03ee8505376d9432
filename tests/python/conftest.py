"""Shared fixtures for the real-client tests: they start the built `reticle` binary."""

import contextlib
import dataclasses
import http.server
import json
import os
import pathlib
import shutil
import signal
import subprocess
import threading
import time

import pytest
from mcp import StdioServerParameters

ROOT = pathlib.Path(__file__).resolve().parents[2]
# The ICCAD-style clip most tests evaluate.
LAYOUT = ROOT / "fixtures" / "layouts" / "lines_and_pad.glp"
# A waited job that runs for seconds on any machine (40 ILT iterations of LAYOUT: about 6 s
# alone on two cores, sandbox-2c, 2026-12-02; under 300 MB): what tests of giving up on a
# call cancel.
LONG_JOB = {"layout": str(LAYOUT), "deck": "iccad13_m1", "iterations": 40, "wait": True}


def params(reticle_bin, env):
    """How the SDK client starts the host: `reticle serve` on stdio with `env`."""
    return StdioServerParameters(command=reticle_bin, args=["serve"], env=env)


def pytest_configure(config):
    """`timed`: a test that asserts its own wall time. `run-tests` runs these alone, after
    everything else, so that no other test shares the two cores with them (D221)."""
    config.addinivalue_line("markers", "timed: asserts a wall-time bound; run alone")


@pytest.fixture()
def anyio_backend():
    """The SDK tests run on asyncio."""
    return "asyncio"


@pytest.fixture(scope="session")
def reticle_bin() -> str:
    path = os.environ.get("RETICLE_BIN", str(ROOT / "target" / "release" / "reticle"))
    if not os.access(path, os.X_OK):
        pytest.fail(
            f"reticle binary not found at {path}; run `cargo build --release --workspace --bins` first"
        )
    return path


@pytest.fixture()
def server_env(tmp_path) -> dict:
    env = dict(os.environ)
    env["MCP_READY_FILE"] = str(tmp_path / "mcp.ready")
    env["RETICLE_LOG_DIR"] = str(tmp_path / "logs")
    # The fixtures are the only files the tests ask the host to read; the CPU engine
    # keeps these client tests fast (the GPU path has its own tests in the kernel).
    env["RETICLE_ALLOWED_ROOTS"] = str(ROOT / "fixtures")
    env["RETICLE_BACKEND"] = "cpu"
    # Layout sessions write their artifacts here, never into the working directory.
    env["KLAYOUT_MCP_ARTIFACT_ROOT"] = str(tmp_path / "artifacts")
    return env


@pytest.fixture(scope="session")
def inspector_cli() -> str:
    path = ROOT / "target" / "test-env" / "node" / "node_modules" / ".bin" / "mcp-inspector"
    if not path.exists():
        pytest.fail(f"MCP Inspector CLI not installed at {path}; run scripts/setup.sh test")
    if shutil.which("node") is None:
        pytest.fail("node is not on PATH; the Inspector CLI needs it")
    return str(path)


class _AssetBackend(http.server.BaseHTTPRequestHandler):
    """A stand-in asset store for `populate_backend`: every POST creates `asset-1`."""

    def do_POST(self):  # noqa: N802 (http.server API)
        self.rfile.read(int(self.headers["Content-Length"]))
        data = json.dumps({"id": "asset-1"}).encode()
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="session")
def backend_url():
    """The URL of a local asset store (RETICLE_BACKEND_URL) that accepts every upload."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _AssetBackend)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@dataclasses.dataclass
class HttpServer:
    """One `reticle serve --http` process started by the `http_server` fixture."""

    proc: subprocess.Popen
    url: str  # the MCP endpoint, from line 2 of the ready file
    ready_file: pathlib.Path
    stderr_path: pathlib.Path

    @property
    def origin(self) -> str:
        """`http://127.0.0.1:PORT`, the endpoint without its path."""
        return self.url.rsplit("/", 1)[0]

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")


# How long `reticle serve --http` may take to write its endpoint, and to exit on SIGTERM.
HTTP_START_S = 30
HTTP_STOP_S = 15


@pytest.fixture()
def http_server(reticle_bin, server_env, tmp_path):
    """Starts `reticle serve --http ADDR` processes; stops each at the end and asserts it exits 0.

    `http_server(tokens={"alice": "tokA"})` sets RETICLE_HTTP_TOKENS; `args` are extra
    command-line arguments (`--anonymous`, `--tokens-file F`, ...), `env` extra settings.
    Returns an `HttpServer` once the ready file's second line (the endpoint URL) is there.
    """
    started: list[HttpServer] = []

    def start(*, tokens=None, args=(), env=None, addr="127.0.0.1:0") -> HttpServer:
        n = len(started)
        ready = tmp_path / f"http{n}.ready"
        stderr_path = tmp_path / f"http{n}.stderr"
        full_env = dict(server_env)
        for key in [k for k in full_env if k.startswith("RETICLE_HTTP_")]:
            del full_env[key]  # only what the test passes configures the transport
        full_env["MCP_READY_FILE"] = str(ready)
        # Stop promptly at the end of a test: in-flight requests get 2 s after SIGTERM.
        full_env["RETICLE_DRAIN_MS"] = "2000"
        if tokens:
            full_env["RETICLE_HTTP_TOKENS"] = ",".join(f"{name}={tok}" for name, tok in tokens.items())
        full_env.update(env or {})
        with open(stderr_path, "wb") as err:
            proc = subprocess.Popen(
                [reticle_bin, "serve", "--http", addr, *args],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, env=full_env,
            )
        server = HttpServer(proc=proc, url="", ready_file=ready, stderr_path=stderr_path)
        started.append(server)
        deadline = time.monotonic() + HTTP_START_S
        while time.monotonic() < deadline:
            lines = ready.read_text().splitlines() if ready.exists() else []
            if len(lines) >= 2 and lines[1].strip():
                pid = lines[0].split()[0]
                assert pid == str(proc.pid), f"ready file names pid {pid}, the server is {proc.pid}"
                server.url = lines[1].strip()
                # The endpoint as clients reach it: http://ADDR/mcp, or the --public-url.
                assert server.url.startswith(("http://", "https://")) and server.url.endswith("/mcp"), server.url
                return server
            if proc.poll() is not None:
                pytest.fail(f"reticle serve --http {addr} exited {proc.returncode} before it was ready:\n"
                            f"{server.stderr()[-4000:]}")
            time.sleep(0.05)
        pytest.fail(f"reticle serve --http {addr}: no endpoint URL on line 2 of {ready} "
                    f"after {HTTP_START_S} s:\n{server.stderr()[-4000:]}")

    yield start

    problems = []
    for server in started:
        proc = server.proc
        if proc.poll() is not None:
            if server.url:  # (one that never got ready has failed its test already)
                problems.append(f"pid {proc.pid} had already exited {proc.returncode}:\n{server.stderr()[-2000:]}")
            continue
        children = _children(proc.pid)
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(HTTP_STOP_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            problems.append(f"pid {proc.pid} still ran {HTTP_STOP_S} s after SIGTERM:\n{server.stderr()[-2000:]}")
            continue
        if code != 0:
            problems.append(f"pid {proc.pid} exited {code} on SIGTERM:\n{server.stderr()[-2000:]}")
        elif server.url and server.ready_file.exists():
            problems.append(f"pid {proc.pid} exited but left its ready file {server.ready_file}")
        deadline = time.monotonic() + 2
        while (left := [c for c in children if _alive(c)]) and time.monotonic() < deadline:
            time.sleep(0.05)
        if left:
            problems.append(f"pid {proc.pid} exited but its children {left} still run")
    assert not problems, "\n".join(problems)


def _children(pid: int) -> list[int]:
    """The direct children of `pid` (its workers), from /proc."""
    found = []
    for task in pathlib.Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            found += [int(c) for c in (task / "children").read_text().split()]
    return found


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie awaiting its reaper counts as gone)."""
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
