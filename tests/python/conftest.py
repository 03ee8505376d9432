"""Shared fixtures for the real-client tests: they start the built `reticle` binary."""

import os
import pathlib
import shutil

import pytest
from mcp import StdioServerParameters

ROOT = pathlib.Path(__file__).resolve().parents[2]
# The ICCAD-style clip most tests evaluate.
LAYOUT = ROOT / "fixtures" / "layouts" / "lines_and_pad.glp"


def params(reticle_bin, env):
    """How the SDK client starts the host: `reticle serve` on stdio with `env`."""
    return StdioServerParameters(command=reticle_bin, args=["serve"], env=env)


@pytest.fixture()
def anyio_backend():
    """The SDK tests run on asyncio."""
    return "asyncio"


@pytest.fixture(scope="session")
def reticle_bin() -> str:
    path = os.environ.get("RETICLE_BIN", str(ROOT / "target" / "debug" / "reticle"))
    if not os.access(path, os.X_OK):
        pytest.fail(f"reticle binary not found at {path}; run `cargo build --workspace --bins` first")
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
