"""populate_backend against a real HTTP server on loopback: success, 500,
timeout, connection refused, validation failure, and no backend configured."""

import http.server
import json
import socket
import threading
import time

import anyio
import pytest
from mcp import Client, StdioServerParameters

pytestmark = pytest.mark.anyio


class Handler(http.server.BaseHTTPRequestHandler):
    received = []

    def do_POST(self):  # noqa: N802 (http.server API)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        Handler.received.append((self.path, json.loads(body)))
        if self.path.startswith("/ok/"):
            self._reply(201, {"id": "asset-7"})
        elif self.path.startswith("/fail/"):
            self._reply(500, {"error": "internal error"})
        elif self.path.startswith("/slow/"):
            time.sleep(7)
            self._reply(201, {"id": "too-late"})

    def _reply(self, status, payload):
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def backend():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


VALID = {"job_id": "job_1"}


async def call(reticle_bin, env, base_url, args):
    env = dict(env)
    if base_url is not None:
        env["RETICLE_BACKEND_URL"] = base_url
    else:
        env.pop("RETICLE_BACKEND_URL", None)
    server = StdioServerParameters(command=reticle_bin, args=["serve"], env=env)
    with anyio.fail_after(60):
        async with Client(server, mode="legacy") as client:
            return await client.call_tool("populate_backend", args)


async def test_success(reticle_bin, server_env, backend):
    Handler.received.clear()
    result = await call(reticle_bin, server_env, backend + "/ok", {"asset": VALID, "schema": "poll.input"})
    assert not result.is_error, result
    assert result.structured_content["asset_id"] == "asset-7"
    assert result.structured_content["backend_url"].endswith("/ok/reticle-assets/")
    assert Handler.received == [("/ok/reticle-assets/", VALID)]


async def test_server_error(reticle_bin, server_env, backend):
    result = await call(reticle_bin, server_env, backend + "/fail", {"asset": VALID, "schema": "poll.input"})
    assert result.is_error
    error = result.structured_content["error"]
    assert error["code"] == "BACKEND_ERROR"
    assert error["details"]["status"] == 500
    # A 5xx is a downstream fault the model may retry after the hinted delay.
    assert error["fault_class"] == "downstream"
    assert error["retry_after_ms"] > 0
    assert error["details"]["hint"]


async def test_timeout_after_five_seconds(reticle_bin, server_env, backend):
    started = time.monotonic()
    result = await call(reticle_bin, server_env, backend + "/slow", {"asset": VALID, "schema": "poll.input"})
    took = time.monotonic() - started
    assert result.is_error
    assert result.structured_content["error"]["code"] == "BACKEND_ERROR"
    assert "timeout" in result.structured_content["error"]["details"]["detail"]
    # The POST may have been stored: NeverReplay, so no retry hint, an ambiguous outcome.
    assert result.structured_content["error"]["fault_class"] == "ambiguous_outcome"
    assert "retry_after_ms" not in result.structured_content["error"]
    assert 4.5 < took < 7, took


async def test_connection_refused(reticle_bin, server_env):
    result = await call(reticle_bin, server_env, f"http://127.0.0.1:{closed_port()}", {"asset": VALID, "schema": "poll.input"})
    assert result.is_error
    error = result.structured_content["error"]
    assert error["code"] == "BACKEND_ERROR"
    assert "network_unreachable" in error["details"]["detail"]
    # Nothing reached the backend: a transport fault, safe to retry later.
    assert error["fault_class"] == "transport"
    assert error["retry_after_ms"] > 0


async def test_invalid_asset_is_not_posted(reticle_bin, server_env, backend):
    Handler.received.clear()
    result = await call(reticle_bin, server_env, backend + "/ok", {"asset": {"job_id": 5}, "schema": "poll.input"})
    assert result.is_error
    error = result.structured_content["error"]
    assert error["code"] == "INVALID_INPUT"
    assert error["details"]["reason"] == "validation_failed"
    assert error["details"]["errors"][0]["path"] == "/job_id"
    assert Handler.received == []


async def test_no_backend_configured(reticle_bin, server_env):
    result = await call(reticle_bin, server_env, None, {"asset": VALID, "schema": "poll.input"})
    assert result.is_error
    assert result.structured_content["error"]["code"] == "UNSUPPORTED"
