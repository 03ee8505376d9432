"""`reticle serve --http`: the official Python SDK's Streamable HTTP client in both eras,
bearer-token isolation, and the transport's HTTP-level rules checked with raw requests
(authentication, protected resource metadata, Origin/Host, sessions, SSE, limits)."""

import contextlib
import json
import socket
import subprocess
import time

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from conftest import LAYOUT, LONG_JOB, ROOT
from tool_calls import DEMO_GDS, call_every_tool, require_klayout

pytestmark = pytest.mark.anyio

ALICE, BOB = "tokA-alice-0123456789", "tokB-bob-9876543210"
TOKENS = {"alice": ALICE, "bob": BOB}
LEGACY = "2025-11-25"
MODERN = "2026-07-28"
ACCEPT = "application/json, text/event-stream"
MIB = 1 << 20


# --- the SDK client ---------------------------------------------------------------------------

@contextlib.asynccontextmanager
async def sdk_client(url, token, mode):
    """The SDK's `Client` over its Streamable HTTP transport, sending `Authorization: Bearer`."""
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=120)) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
            session = client.session
            if mode == "legacy":
                assert session.initialize_result is not None
                assert session.protocol_version in ("2025-11-25", "2025-06-18"), session.protocol_version
            else:
                # auto probes server/discover first and must stay modern over HTTP too.
                assert session.discover_result is not None, "auto mode fell back to legacy"
                assert session.protocol_version == MODERN, session.protocol_version
            yield client


def error_code(result):
    """The `structuredContent.error.code` of a tool error result (asserts it is one)."""
    assert result.is_error, result
    return result.structured_content["error"]["code"]


async def poll_until_done(client, job_id):
    while True:
        polled = await client.call_tool("poll", {"job_id": job_id, "render": "json"})
        assert not polled.is_error, polled
        status = polled.structured_content["status"]
        if status not in ("queued", "running"):
            return status
        await anyio.sleep(0.1)


# --- raw HTTP ---------------------------------------------------------------------------------

_TOKEN = object()  # "use the Raw client's own token"


def sse_events(text):
    """The events of an SSE body: dicts with `id` (None when absent) and `data` (joined lines)."""
    events = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        event = {"id": None, "data": None}
        data = []
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "id":
                event["id"] = value
            elif field == "data":
                data.append(value)
        if data:
            event["data"] = "\n".join(data)
        if event["id"] is not None or event["data"] is not None:
            events.append(event)
    return events


def messages(resp):
    """The JSON-RPC messages of a response: its JSON body, or the data of its SSE events."""
    ctype = resp.headers.get("content-type", "")
    if ctype.startswith("application/json"):
        return [resp.json()]
    assert ctype.startswith("text/event-stream"), (resp.status_code, ctype, resp.text[:500])
    return [json.loads(e["data"]) for e in sse_events(resp.text) if e["data"]]


class Raw:
    """Plain HTTP requests to one server's MCP endpoint, as `token` unless told otherwise."""

    def __init__(self, server, token=None):
        self.url = server.url
        self.origin = server.origin
        self.token = token
        self.http = httpx2.Client(timeout=30)
        self.next_id = 100

    def close(self):
        self.http.close()

    def headers(self, token=_TOKEN, session=None, version=None, extra=None):
        token = self.token if token is _TOKEN else token
        h = {"Accept": ACCEPT, "Content-Type": "application/json"}
        if token is not None:
            h["Authorization"] = f"Bearer {token}"
        if session is not None:
            h["Mcp-Session-Id"] = session
        if version is not None:
            h["MCP-Protocol-Version"] = version
        h.update(extra or {})
        return h

    def post(self, body, *, token=_TOKEN, session=None, version=None, headers=None):
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        return self.http.post(self.url, content=content,
                              headers=self.headers(token, session, version, headers))

    def request(self, method, *, token=_TOKEN, session=None, version=LEGACY, headers=None):
        return self.http.request(method, self.url, headers=self.headers(token, session, version, headers))

    def initialize(self, token=_TOKEN, headers=None):
        """A legacy handshake; returns the `Mcp-Session-Id` the server assigned."""
        resp = self.post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": LEGACY, "capabilities": {},
            "clientInfo": {"name": "raw-httpx", "version": "0"}}}, token=token, headers=headers)
        assert resp.status_code == 200, (resp.status_code, resp.text[:500])
        [msg] = messages(resp)
        assert msg["result"]["protocolVersion"] == LEGACY, msg
        sid = resp.headers.get("mcp-session-id")
        assert sid and all(0x21 <= ord(c) <= 0x7E for c in sid), f"bad Mcp-Session-Id {sid!r}"
        note = self.post({"jsonrpc": "2.0", "method": "notifications/initialized"},
                         token=token, session=sid, version=LEGACY, headers=headers)
        assert note.status_code == 202, (note.status_code, note.text[:500])
        return sid

    def rpc(self, method, params=None, *, session, token=_TOKEN):
        """A legacy request in `session`: returns (HTTP response, its JSON-RPC response)."""
        self.next_id += 1
        rid = self.next_id
        resp = self.post({"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}},
                         token=token, session=session, version=LEGACY)
        if resp.status_code != 200:
            return resp, None
        answers = [m for m in messages(resp) if m.get("id") == rid]
        assert len(answers) == 1, (method, resp.text[:1000])
        return resp, answers[0]


@pytest.fixture()
def raw_client():
    made = []

    def make(server, token=None):
        made.append(Raw(server, token))
        return made[-1]

    yield make
    for raw in made:
        raw.close()


def www_authenticate(resp):
    assert resp.status_code == 401, (resp.status_code, resp.text[:500])
    header = resp.headers.get("www-authenticate", "")
    assert header.lower().startswith("bearer"), header
    return header


def resource_metadata_url(header):
    key = 'resource_metadata="'
    assert key in header, header
    return header.split(key, 1)[1].split('"', 1)[0]


# --- the SDK, every tool, both eras -----------------------------------------------------------

@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_every_tool_over_http(http_server, backend_url, mode):
    require_klayout()
    server = http_server(tokens={"alice": ALICE}, env={"RETICLE_BACKEND_URL": backend_url})
    with anyio.fail_after(120):
        async with sdk_client(server.url, ALICE, mode) as client:
            await call_every_tool(client)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_call_the_client_gives_up_on_is_cancelled_on_the_host(http_server, mode):
    """Legacy: the SDK sends notifications/cancelled; modern: it closes the request's stream."""
    server = http_server(tokens={"alice": ALICE})
    with anyio.fail_after(120):
        async with sdk_client(server.url, ALICE, mode) as client:
            # LONG_JOB runs for seconds, so the client gives up mid-run however idle the
            # machine. (A 4096×4096 simulation was used until the engine got faster: 0.4 s
            # alone, so the test passed only under load.)
            with anyio.move_on_after(0.5) as scope:
                await client.call_tool("optimize", LONG_JOB)
            assert scope.cancelled_caught, "40 ILT iterations finished in under 0.5 s?"
            jobs = await cancelled_jobs(client, 1)
            assert jobs["cancelled"] == 1 and jobs["completed"] == 0, jobs
            again = await client.call_tool("simulate", {"layout": str(LAYOUT), "wait": True})
            assert not again.is_error, again
            assert again.structured_content["status"] == "completed"


async def cancelled_jobs(client, want):
    """The host's job counts once `want` jobs were cancelled (or after 5 s)."""
    jobs = None
    for _ in range(100):
        telemetry = await client.call_tool("telemetry", {"render": "json"})
        jobs = telemetry.structured_content["jobs"]
        if jobs["cancelled"] >= want:
            break
        await anyio.sleep(0.05)
    return jobs


# --- isolation between clients ----------------------------------------------------------------

@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_tokens_see_only_their_own_jobs_sessions_and_violations(http_server, mode):
    server = http_server(tokens=TOKENS)
    with anyio.fail_after(120):
        async with sdk_client(server.url, ALICE, mode) as alice:
            started = await alice.call_tool("simulate", {"layout": str(LAYOUT)})
            assert not started.is_error, started
            job_id = started.structured_content["job_id"]
            tiled = await alice.call_tool("evaluate", {"layout": str(LAYOUT), "deck": "iccad13_m1",
                                                       "tiling": "tiles", "pixel_nm": 8, "wait": True})
            assert not tiled.is_error, tiled
            tiled_id = tiled.structured_content["job_id"]
            opened = await alice.call_tool("open_layout", {"path": str(DEMO_GDS)})
            assert not opened.is_error, opened
            sid = opened.structured_content["session_id"]

            # Bob (who started nothing, so no id of his can collide) sees none of it, and
            # cannot cancel or close what is Alice's.
            async with sdk_client(server.url, BOB, mode) as bob:
                assert error_code(await bob.call_tool("poll", {"job_id": job_id})) == "JOB_NOT_FOUND"
                assert error_code(await bob.call_tool("cancel", {"job_id": job_id})) == "JOB_NOT_FOUND"
                assert error_code(await bob.call_tool(
                    "violations", {"job_id": tiled_id, "limit": 5})) == "JOB_NOT_FOUND"
                assert error_code(await bob.call_tool("list_cells", {"session_id": sid})) == "SESSION_NOT_FOUND"
                # close_session is idempotent: an id unknown to the caller is "not closed".
                closed = await bob.call_tool("close_session", {"session_id": sid})
                assert not closed.is_error and closed.structured_content["closed"] is False, closed

            # A second client of Alice's: a legacy session is its own scope; modern requests
            # carry no session, so every request with Alice's token shares her scope.
            async with sdk_client(server.url, ALICE, mode) as alice2:
                polled = await alice2.call_tool("poll", {"job_id": job_id})
                if mode == "legacy":
                    assert error_code(polled) == "JOB_NOT_FOUND"
                    assert error_code(await alice2.call_tool("list_cells", {"session_id": sid})) == "SESSION_NOT_FOUND"
                else:
                    assert not polled.is_error, polled
                    assert polled.structured_content["job_id"] == job_id

            # Alice's own work is intact: Bob's cancel did not reach her job.
            assert await poll_until_done(alice, job_id) == "completed"
            page = await alice.call_tool("violations", {"job_id": tiled_id, "limit": 5})
            assert not page.is_error, page
            assert page.structured_content["job_id"] == tiled_id
            cells = await alice.call_tool("list_cells", {"session_id": sid})
            assert not cells.is_error, cells
            closed = await alice.call_tool("close_session", {"session_id": sid})
            assert not closed.is_error and closed.structured_content["closed"] is True, closed


def test_a_session_id_is_bound_to_its_token(http_server, raw_client):
    server = http_server(tokens=TOKENS)
    raw = raw_client(server, ALICE)
    sid = raw.initialize()
    # Bob holding Alice's session id can neither use it, listen on it, nor end it.
    resp, _ = raw.rpc("tools/list", session=sid, token=BOB)
    assert resp.status_code == 404, (resp.status_code, resp.text[:500])
    assert raw.request("GET", session=sid, token=BOB).status_code == 404
    assert raw.request("DELETE", session=sid, token=BOB).status_code == 404
    resp, answer = raw.rpc("tools/list", session=sid)
    assert resp.status_code == 200 and answer["result"]["tools"], (resp.status_code, resp.text[:500])


async def test_tokens_file_with_per_token_roots(http_server, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    tokens_file = tmp_path / "tokens.json"
    tokens_file.write_text(json.dumps({"tokens": [
        {"name": "alice", "token": ALICE, "allowed_roots": [str(ROOT / "fixtures")]},
        {"name": "carol", "token": "tokC-carol-5555", "allowed_roots": [str(elsewhere)]},
        {"name": "dave", "token": "tokD-dave-7777"},
    ]}))
    server = http_server(args=["--tokens-file", str(tokens_file)])
    with anyio.fail_after(60):
        async with sdk_client(server.url, ALICE, "auto") as alice:
            result = await alice.call_tool("simulate", {"layout": str(LAYOUT), "wait": True})
            assert not result.is_error, result
        async with sdk_client(server.url, "tokC-carol-5555", "auto") as carol:
            result = await carol.call_tool("simulate", {"layout": str(LAYOUT), "wait": True})
            assert error_code(result) == "PATH_NOT_ALLOWED"
        # No allowed_roots: the server's roots (RETICLE_ALLOWED_ROOTS = fixtures) apply.
        async with sdk_client(server.url, "tokD-dave-7777", "auto") as dave:
            result = await dave.call_tool("simulate", {"layout": str(LAYOUT), "wait": True})
            assert not result.is_error, result
            result = await dave.call_tool("simulate", {"layout": str(tokens_file), "wait": True})
            assert error_code(result) == "PATH_NOT_ALLOWED"


# --- authentication ---------------------------------------------------------------------------

def test_requests_without_a_valid_token_are_401(http_server, raw_client):
    server = http_server(tokens=TOKENS)
    raw = raw_client(server)
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}

    missing = www_authenticate(raw.post(init, token=None))
    assert "invalid_token" not in missing, f"no token was sent, yet: {missing}"
    prm_url = resource_metadata_url(missing)
    assert prm_url.startswith(server.origin + "/.well-known/oauth-protected-resource"), prm_url

    wrong = www_authenticate(raw.post(init, token=ALICE + "x"))
    assert 'error="invalid_token"' in wrong, wrong
    assert resource_metadata_url(wrong) == prm_url

    basic = raw.http.post(server.url, content=json.dumps(init).encode(), headers={
        "Accept": ACCEPT, "Content-Type": "application/json", "Authorization": "Basic YWxpY2U6dG9rQQ=="})
    www_authenticate(basic)
    # Not only POST: the standalone stream and session termination need the token too.
    for method in ("GET", "DELETE"):
        www_authenticate(raw.request(method, token=None))

    # The advertised metadata document is served, without a token, and names this endpoint.
    prm = raw.http.get(prm_url)
    assert prm.status_code == 200, (prm.status_code, prm.text[:500])
    assert prm.json()["resource"] == server.url, prm.json()

    # And a right token is let in.
    assert raw.initialize(token=BOB)


def test_protected_resource_metadata(http_server, raw_client):
    server = http_server(tokens=TOKENS)
    raw = raw_client(server)
    for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
        resp = raw.http.get(server.origin + path)
        assert resp.status_code == 200, (path, resp.status_code, resp.text[:500])
        assert resp.headers["content-type"].startswith("application/json"), resp.headers
        doc = resp.json()
        assert doc["resource"] == server.url, (path, doc)
        assert doc["bearer_methods_supported"] == ["header"], (path, doc)


def test_public_url_is_the_advertised_resource(http_server, raw_client):
    public = "https://reticle.example.org/mcp"
    # The ready file names the bound address (a local supervisor's port), not the public URL.
    server = http_server(tokens=TOKENS, args=["--public-url", public])
    assert server.url.startswith("http://127.0.0.1:") and server.url.endswith("/mcp"), server.url
    raw = raw_client(server)
    prm_url = resource_metadata_url(www_authenticate(raw.post({"jsonrpc": "2.0", "id": 1, "method": "ping"},
                                                              token=None)))
    assert prm_url.startswith("https://reticle.example.org/.well-known/oauth-protected-resource"), prm_url
    doc = raw.http.get(server.origin + "/.well-known/oauth-protected-resource/mcp").json()
    assert doc["resource"] == public, doc


def test_start_up_without_tokens_fails(reticle_bin, server_env, tmp_path):
    env = dict(server_env, MCP_READY_FILE=str(tmp_path / "none.ready"))
    env.pop("RETICLE_HTTP_TOKENS", None)
    proc = subprocess.run([reticle_bin, "serve", "--http", "127.0.0.1:0"], env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert "token" in proc.stderr.lower(), proc.stderr[-2000:]
    assert not (tmp_path / "none.ready").exists()


def test_anonymous_only_on_loopback(reticle_bin, server_env, tmp_path):
    env = dict(server_env, MCP_READY_FILE=str(tmp_path / "none.ready"))
    env.pop("RETICLE_HTTP_TOKENS", None)
    proc = subprocess.run([reticle_bin, "serve", "--http", "0.0.0.0:0", "--anonymous"], env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
    assert proc.returncode != 0, f"--anonymous on 0.0.0.0 was accepted:\n{proc.stderr[-2000:]}"
    assert "anonymous" in proc.stderr.lower() or "loopback" in proc.stderr.lower(), proc.stderr[-2000:]
    assert not (tmp_path / "none.ready").exists()


def test_anonymous_on_loopback_needs_no_token(http_server, raw_client):
    server = http_server(args=["--anonymous"])
    raw = raw_client(server)  # no Authorization header at all
    sid = raw.initialize()
    resp, answer = raw.rpc("ping", session=sid)
    assert resp.status_code == 200 and answer["result"] == {}, resp.text[:500]


# --- Origin and Host --------------------------------------------------------------------------

def test_origin_and_host_are_validated(http_server, raw_client):
    server = http_server(tokens=TOKENS)
    raw = raw_client(server, ALICE)
    port = server.url.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)[1]
    for origin in ("https://evil.example.com", "http://localhost.evil.example.com", "null",
                   "http://127.0.0.1.nip.io:" + port):
        resp = raw.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers={"Origin": origin})
        assert resp.status_code == 403, (origin, resp.status_code, resp.text[:300])
    for method in ("GET", "DELETE"):
        resp = raw.request(method, headers={"Origin": "https://evil.example.com"})
        assert resp.status_code == 403, (method, resp.status_code, resp.text[:300])
    for origin in ("http://localhost:5173", "https://localhost", "http://127.0.0.1:" + port, "http://[::1]:8080"):
        assert raw.initialize(headers={"Origin": origin}), origin
    # DNS rebinding: a loopback-bound server answers only loopback Host names.
    resp = raw.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers={"Host": "evil.example.com"})
    assert resp.status_code == 403, (resp.status_code, resp.text[:300])
    assert raw.initialize(headers={"Host": f"localhost:{port}"})


def test_allowed_origin_flag_adds_an_origin(http_server, raw_client):
    server = http_server(tokens=TOKENS, args=["--allowed-origin", "https://app.example.com"])
    raw = raw_client(server, ALICE)
    assert raw.initialize(headers={"Origin": "https://app.example.com"})
    assert raw.initialize(headers={"Origin": "http://localhost:3000"})
    resp = raw.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers={"Origin": "https://other.example.com"})
    assert resp.status_code == 403, (resp.status_code, resp.text[:300])


# --- sessions, streams, limits (legacy era) ---------------------------------------------------

def test_delete_ends_the_session(http_server, raw_client):
    server = http_server(tokens=TOKENS)
    raw = raw_client(server, ALICE)
    sid = raw.initialize()
    resp, answer = raw.rpc("ping", session=sid)
    assert resp.status_code == 200 and answer["result"] == {}, resp.text[:500]
    deleted = raw.request("DELETE", session=sid)
    assert deleted.status_code in (200, 204), (deleted.status_code, deleted.text[:300])
    resp, _ = raw.rpc("ping", session=sid)
    assert resp.status_code == 404, (resp.status_code, resp.text[:300])
    assert raw.request("GET", session=sid).status_code == 404
    assert raw.request("DELETE", session=sid).status_code == 404
    # A new handshake gives a new, working session.
    sid2 = raw.initialize()
    assert sid2 != sid
    resp, answer = raw.rpc("ping", session=sid2)
    assert resp.status_code == 200 and answer["result"] == {}, resp.text[:500]


def test_tools_call_streams_sse_with_event_ids_and_resumes(http_server, raw_client):
    server = http_server(tokens=TOKENS)
    raw = raw_client(server, ALICE)
    sid = raw.initialize()
    listed, _ = raw.rpc("tools/list", session=sid)
    assert listed.headers["content-type"].startswith("application/json"), listed.headers

    resp = raw.post({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                     "params": {"name": "health", "arguments": {}}}, session=sid, version=LEGACY)
    assert resp.status_code == 200, (resp.status_code, resp.text[:500])
    assert resp.headers["content-type"].startswith("text/event-stream"), resp.headers
    events = sse_events(resp.text)
    assert events and all(e["id"] for e in events), f"SSE events without an id: {events}"
    ids = [e["id"] for e in events]
    assert len(set(ids)) == len(ids), ids
    answers = [i for i, e in enumerate(events) if e["data"] and json.loads(e["data"]).get("id") == 7]
    assert len(answers) == 1, events
    answer = json.loads(events[answers[0]]["data"])
    assert answer["result"]["structuredContent"]["status"] == "ok", answer
    assert answers[0] > 0, (
        "the response is the stream's first event: no earlier event id to resume from "
        f"(2025-11-25 transports: the server SHOULD first send an event with an id and empty data): {events}")

    # Resuming after the event before the response replays the response, on a GET.
    headers = raw.headers(session=sid, version=LEGACY, extra={"Last-Event-ID": events[answers[0] - 1]["id"]})
    headers["Accept"] = "text/event-stream"
    replayed = []
    with raw.http.stream("GET", server.url, headers=headers, timeout=httpx2.Timeout(10, read=5)) as stream:
        assert stream.status_code == 200, stream.status_code
        assert stream.headers["content-type"].startswith("text/event-stream"), stream.headers
        buf = ""
        deadline = time.monotonic() + 10
        try:
            for chunk in stream.iter_text():
                buf += chunk
                replayed = [json.loads(e["data"]) for e in sse_events(buf) if e["data"]]
                if any(m.get("id") == 7 for m in replayed) or time.monotonic() > deadline:
                    break
        except httpx2.ReadTimeout:
            pass
    assert [m for m in replayed if m.get("id") == 7] == [answer], replayed


SLOW_CALL = {"name": "simulate", "arguments": {"layout": str(LAYOUT), "pixel_nm": 0.5, "wait": True}}
# Far longer than the resume grace and the drop's detection together (tens of seconds).
LONG_CALL = {"name": "optimize", "arguments": {
    "layout": str(LAYOUT), "deck": str(ROOT / "fixtures" / "decks" / "acceptance_width.json"),
    "clip_um": [0.0, 0.0, 2.048, 2.048], "pixel_nm": 1, "iterations": 1000, "refine_iterations": 0, "wait": True}}


def open_slow_call(raw, sid, rid, call=SLOW_CALL):
    """POSTs a tools/call (about a second by default), reads its first event and drops the connection;
    returns that event."""
    body = json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": call}).encode()
    with raw.http.stream("POST", raw.url, content=body, headers=raw.headers(session=sid, version=LEGACY)) as resp:
        assert resp.status_code == 200, resp.status_code
        assert resp.headers["content-type"].startswith("text/event-stream"), resp.headers
        buf = ""
        for chunk in resp.iter_text():
            buf += chunk
            if "\n\n" in buf.replace("\r\n", "\n"):
                break
    first = sse_events(buf)[0]
    assert first["id"], first
    assert not (first["data"] and json.loads(first["data"]).get("id") == rid), "answered before the drop"
    return first


def host_jobs(raw, sid):
    _, answer = raw.rpc("tools/call", {"name": "telemetry", "arguments": {"render": "json"}}, session=sid)
    return answer["result"]["structuredContent"]["jobs"]


def test_a_dropped_stream_resumes_with_last_event_id(http_server, raw_client):
    server = http_server(tokens=TOKENS)
    raw = raw_client(server, ALICE)
    sid = raw.initialize()
    first = open_slow_call(raw, sid, 41)
    # Reconnect at once (well within --resume-grace-ms): the call goes on and its answer
    # arrives on the resumed stream.
    headers = raw.headers(session=sid, version=LEGACY, extra={"Last-Event-ID": first["id"]})
    headers["Accept"] = "text/event-stream"
    answer = None
    with raw.http.stream("GET", raw.url, headers=headers, timeout=httpx2.Timeout(10, read=60)) as stream:
        assert stream.status_code == 200, stream.status_code
        buf = ""
        for chunk in stream.iter_text():
            buf += chunk
            found = [json.loads(e["data"]) for e in sse_events(buf) if e["data"]]
            found = [m for m in found if m.get("id") == 41]
            if found:
                answer = found[0]
                break
    assert answer is not None, buf
    assert answer["result"]["structuredContent"]["status"] == "completed", answer
    jobs = host_jobs(raw, sid)
    assert jobs["cancelled"] == 0 and jobs["completed"] == 1, jobs


def test_a_dropped_stream_not_resumed_is_cancelled(http_server, raw_client):
    server = http_server(tokens=TOKENS)
    raw = raw_client(server, ALICE)
    sid = raw.initialize()
    open_slow_call(raw, sid, 42, LONG_CALL)
    # No reconnection: after the resume grace (750 ms by default) the host cancels the job.
    deadline = time.monotonic() + 10
    jobs = host_jobs(raw, sid)
    while jobs["cancelled"] == 0 and time.monotonic() < deadline:
        time.sleep(0.1)
        jobs = host_jobs(raw, sid)
    assert jobs["cancelled"] == 1 and jobs["completed"] == 0, jobs


def test_standalone_get_stream_opens(http_server, raw_client):
    server = http_server(tokens=TOKENS)
    raw = raw_client(server, ALICE)
    sid = raw.initialize()
    headers = raw.headers(session=sid, version=LEGACY)
    headers["Accept"] = "text/event-stream"
    with raw.http.stream("GET", server.url, headers=headers) as stream:
        assert stream.status_code == 200, stream.status_code
        assert stream.headers["content-type"].startswith("text/event-stream"), stream.headers
    # The server is still fine after the client dropped the stream.
    resp, answer = raw.rpc("ping", session=sid)
    assert resp.status_code == 200 and answer["result"] == {}, resp.text[:500]


def test_body_over_1_mib_is_413(http_server, raw_client):
    server = http_server(tokens=TOKENS)
    raw = raw_client(server, ALICE)
    sid = raw.initialize()

    def ping_of_size(size):
        body = json.dumps({"jsonrpc": "2.0", "id": 9, "method": "ping", "params": {"pad": ""}}).encode()
        body = body.replace(b'"pad": ""', b'"pad": "' + b"x" * (size - len(body)) + b'"')
        assert len(body) == size
        return raw.post(body, session=sid, version=LEGACY)

    under = ping_of_size(MIB - 1024)
    assert under.status_code == 200 and messages(under)[0]["result"] == {}, (under.status_code, under.text[:300])
    over = ping_of_size(MIB + 1024)
    assert over.status_code == 413, (over.status_code, over.text[:300])
    # The same body sent chunked (no Content-Length) is held to the same limit.
    big = b'{"jsonrpc": "2.0", "id": 10, "method": "ping", "params": {"pad": "' + b"x" * (MIB + 1024) + b'"}}'
    chunked = raw.http.post(raw.url, content=(big[i:i + 65536] for i in range(0, len(big), 65536)),
                            headers=raw.headers(session=sid, version=LEGACY))
    assert chunked.status_code == 413, (chunked.status_code, chunked.text[:300])
    resp, answer = raw.rpc("ping", session=sid)
    assert resp.status_code == 200 and answer["result"] == {}, resp.text[:500]


def test_malformed_json_is_a_parse_error(http_server, raw_client):
    server = http_server(tokens=TOKENS)
    raw = raw_client(server, ALICE)
    sid = raw.initialize()
    resp = raw.post(b'{"jsonrpc": "2.0", "id": 3, "method": "ping"', session=sid, version=LEGACY)
    print(f"malformed JSON: HTTP {resp.status_code} {resp.text[:300]}")
    assert resp.status_code in (200, 400), (resp.status_code, resp.text[:300])
    [msg] = messages(resp)
    assert msg["error"]["code"] == -32700, msg
    assert msg.get("id") is None, msg
    # The server and the session survive it.
    resp, answer = raw.rpc("ping", session=sid)
    assert resp.status_code == 200 and answer["result"] == {}, resp.text[:500]


# --- modern era, raw --------------------------------------------------------------------------

def modern_body(rid, method, params=None):
    params = dict(params or {})
    params["_meta"] = {"io.modelcontextprotocol/protocolVersion": MODERN,
                       "io.modelcontextprotocol/clientInfo": {"name": "raw-httpx", "version": "0"},
                       "io.modelcontextprotocol/clientCapabilities": {}}
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}


def test_modern_requests_are_stateless_and_header_checked(http_server, raw_client):
    server = http_server(tokens=TOKENS)
    raw = raw_client(server, ALICE)
    resp = raw.post(modern_body(1, "tools/list"), version=MODERN, headers={"Mcp-Method": "tools/list"})
    assert resp.status_code == 200, (resp.status_code, resp.text[:500])
    [msg] = messages(resp)
    assert msg["id"] == 1 and msg["result"]["tools"] and msg["result"]["resultType"] == "complete", msg
    assert "mcp-session-id" not in resp.headers, "a modern request was given a session"

    resp = raw.post(modern_body(2, "tools/call", {"name": "health", "arguments": {}}), version=MODERN,
                    headers={"Mcp-Method": "tools/call", "Mcp-Name": "health"})
    assert resp.status_code == 200, (resp.status_code, resp.text[:500])
    [answer] = [m for m in messages(resp) if m.get("id") == 2]
    assert answer["result"]["structuredContent"]["status"] == "ok", answer

    # The headers mirror the body; a mismatch is 400 HeaderMismatch (-32020).
    for version, headers in ((MODERN, {"Mcp-Method": "tools/call"}),
                             (LEGACY, {"Mcp-Method": "tools/list"})):
        resp = raw.post(modern_body(3, "tools/list"), version=version, headers=headers)
        assert resp.status_code == 400, (version, headers, resp.status_code, resp.text[:300])
        assert resp.json()["error"]["code"] == -32020, resp.text[:300]
    resp = raw.post(modern_body(4, "tools/call", {"name": "health", "arguments": {}}), version=MODERN,
                    headers={"Mcp-Method": "tools/call", "Mcp-Name": "telemetry"})
    assert resp.status_code == 400 and resp.json()["error"]["code"] == -32020, (resp.status_code, resp.text[:300])

    # An unknown method is 404 with a JSON-RPC -32601 body (so clients do not fall back).
    resp = raw.post(modern_body(5, "no/such_method"), version=MODERN, headers={"Mcp-Method": "no/such_method"})
    assert resp.status_code == 404, (resp.status_code, resp.text[:300])
    assert resp.json()["error"]["code"] == -32601, resp.text[:300]
