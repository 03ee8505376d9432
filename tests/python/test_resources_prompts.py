"""Issue 30 through the official Python SDK, over stdio and Streamable HTTP, in both eras:
the files a tool makes are the client's MCP resources (listed, read whole or in parts,
linked from the result with `resource_link`, a small PNG inline as an `image` block), no
other client can list or read them, and the prompts render and complete."""

import base64
import contextlib
import pathlib

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError as McpError
from mcp.types import PromptReference

from conftest import LAYOUT, params
from layouts import gcd_path
from tool_calls import DEMO_GDS

pytestmark = pytest.mark.anyio

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
ALICE, BOB = "tokA-alice-0123456789", "tokB-bob-9876543210"
VIEWER = "ui://reticle/viewer"


@contextlib.asynccontextmanager
async def http_client(url, token, mode):
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
            yield client


async def all_resources(client):
    """Every page of resources/list."""
    resources, cursor, pages = [], None, 0
    while True:
        page = await client.list_resources(cursor=cursor, cache_mode="bypass")
        pages += 1
        resources.extend(page.resources)
        cursor = page.next_cursor
        if cursor is None:
            return resources
        assert pages < 1000, "nextCursor never ended"


def png_size(data: bytes):
    assert data.startswith(PNG_SIGNATURE), data[:16]
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


async def check_evaluation_resources(client):
    """An evaluate of gcd_45nm: its heat map is listed, linked, readable and inline."""
    result = await client.call_tool("evaluate", {
        "layout": str(gcd_path()), "deck": "nangate45_m1v1", "layer": "11/0",
        "pixel_nm": 8, "wait": True,
    })
    assert not result.is_error, result.structured_content
    heatmap_path = pathlib.Path(result.structured_content["artifacts"]["heatmap"]["png"]["path"])
    on_disk = heatmap_path.read_bytes()

    kinds = [block.type for block in result.content]
    assert kinds[0] == "text", kinds
    images = [b for b in result.content if b.type == "image"]
    assert len(images) == 1, f"detail=concise gives one image: {kinds}"
    width, height = png_size(base64.b64decode(images[0].data))
    assert images[0].mime_type == "image/png"
    assert max(width, height) <= 384, (width, height)

    links = {str(b.uri): b for b in result.content if b.type == "resource_link"}
    heat = [uri for uri in links if uri.endswith("/heatmap.png")]
    assert len(heat) == 1, list(links)
    assert any(uri.endswith("/violations.jsonl") for uri in links), list(links)
    assert links[heat[0]].mime_type == "image/png"

    listed = {str(r.uri): r for r in await all_resources(client)}
    assert heat[0] in listed, sorted(listed)
    assert listed[heat[0]].size == len(on_disk)

    read = await client.read_resource(heat[0])
    blob = base64.b64decode(read.contents[0].blob)
    assert blob.startswith(PNG_SIGNATURE)
    assert blob == on_disk, "resources/read returns the file on disk"

    # The same file in parts, through the part template.
    parts, offset = b"", 0
    while offset is not None:
        part = await client.read_resource(f"{heat[0]}?offset={offset}&length=4096")
        parts += base64.b64decode(part.contents[0].blob)
        offset = part.contents[0].meta["reticle/part"]["next_offset"]
    assert parts == on_disk

    # detail=full: every image, bounded; the payload keeps its paths.
    full = await client.call_tool("evaluate", {
        "layout": str(LAYOUT), "deck": "iccad13_m1", "tiling": "tiles", "pixel_nm": 8,
        "wait": True, "detail": "full",
    })
    assert not full.is_error, full.structured_content
    full_images = [b for b in full.content if b.type == "image"]
    assert 1 <= len(full_images) <= 4
    assert all(max(png_size(base64.b64decode(b.data))) <= 1024 for b in full_images)
    return heat[0]


async def check_other_images(client):
    """simulate with images and render_view: one inline image each (concise), all of
    simulate's at detail=full, and a link to every file; a closed session's files go."""
    sim = await client.call_tool("simulate", {"layout": str(LAYOUT), "images": True, "wait": True})
    assert not sim.is_error, sim.structured_content
    assert [b.type for b in sim.content].count("image") == 1
    links = [str(b.uri) for b in sim.content if b.type == "resource_link"]
    assert any(u.endswith(".npy") for u in links) and any(u.endswith(".png") for u in links), links
    full = await client.call_tool("simulate", {"layout": str(LAYOUT), "images": True, "wait": True,
                                               "detail": "full"})
    pngs = [u for u in (str(b.uri) for b in full.content if b.type == "resource_link") if u.endswith(".png")]
    assert [b.type for b in full.content].count("image") == min(len(pngs), 4) >= 2, pngs

    opened = await client.call_tool("open_layout", {"path": str(DEMO_GDS)})
    assert not opened.is_error, opened.structured_content
    sid = opened.structured_content["session_id"]
    view = await client.call_tool("render_view", {"session_id": sid,
                                                  "image_size": {"width": 800, "height": 400}})
    assert not view.is_error, view.structured_content
    images = [b for b in view.content if b.type == "image"]
    assert len(images) == 1 and max(png_size(base64.b64decode(images[0].data))) <= 384
    render = [str(b.uri) for b in view.content if b.type == "resource_link"]
    assert len(render) == 1 and f"/sessions/{sid}/" in render[0], render
    assert render[0] in {str(r.uri) for r in await all_resources(client)}
    closed = await client.call_tool("close_session", {"session_id": sid})
    assert not closed.is_error
    assert render[0] not in {str(r.uri) for r in await all_resources(client)}, \
        "a closed session's resources are gone"
    with pytest.raises(McpError):
        await client.read_resource(render[0])


async def check_viewer(client):
    """MCP Apps: evaluate, optimize and render_view name the viewer; it is listed as an
    mcp-app HTML resource and reads as a page that names no outside origin."""
    tools = {t.name: t for t in (await client.list_tools()).tools}
    for name in ("evaluate", "optimize", "render_view"):
        assert tools[name].meta["ui"]["resourceUri"] == VIEWER, (name, tools[name].meta)
    assert "ui" not in (tools["health"].meta or {})
    listed = {str(r.uri): r for r in await all_resources(client)}
    assert listed[VIEWER].mime_type == "text/html;profile=mcp-app", listed[VIEWER]
    page = (await client.read_resource(VIEWER)).contents[0]
    assert page.mime_type == "text/html;profile=mcp-app"
    assert page.text.startswith("<!DOCTYPE html>")
    for outside in ("http://", "https://", "@import", "url("):
        assert outside not in page.text, outside
    csp = page.meta["ui"]["csp"]
    assert all(v == [] for v in csp.values()), csp


async def check_prompts(client):
    listed = await client.list_prompts()
    names = [p.name for p in listed.prompts]
    assert len(names) >= 3, names
    for prompt in listed.prompts:
        args = {a.name: f"value-of-{a.name}" for a in (prompt.arguments or []) if a.required}
        got = await client.get_prompt(prompt.name, args)
        assert got.messages, prompt.name
        text = got.messages[0].content.text
        assert all(v in text for v in args.values()), (prompt.name, text)
    with pytest.raises(McpError):
        await client.get_prompt("check_layout", {})
    decks = await client.complete(PromptReference(type="ref/prompt", name="check_layout"),
                                  {"name": "deck", "value": "nan"})
    assert decks.completion.values == ["nangate45_m1v1", "nangate45_m1_litho"], decks
    # The client's own jobs complete a postmortem's job_id (its evaluate ran above).
    jobs = await client.complete(PromptReference(type="ref/prompt", name="job_postmortem"),
                                 {"name": "job_id", "value": "job_"})
    assert jobs.completion.values and all(v.startswith("job_") for v in jobs.completion.values), jobs
    return jobs.completion.values


def gcd_env(server_env):
    env = dict(server_env)
    env["RETICLE_ALLOWED_ROOTS"] = f"{env['RETICLE_ALLOWED_ROOTS']}:{gcd_path().parent}"
    return env


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_resources_images_and_prompts_over_stdio(reticle_bin, server_env, mode):
    with anyio.fail_after(600):
        async with Client(params(reticle_bin, gcd_env(server_env)), mode=mode) as client:
            caps = client.session.initialize_result.capabilities if mode == "legacy" \
                else client.session.discover_result.capabilities
            assert caps.resources is not None and caps.prompts is not None, caps
            heat = await check_evaluation_resources(client)
            unknown = heat.replace("heatmap.png", "no_such_file.png")
            with pytest.raises(McpError) as error:
                await client.read_resource(unknown)
            assert error.value.error.message == "Resource not found"
            await check_other_images(client)
            await check_viewer(client)
            await check_prompts(client)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_over_http_a_client_never_sees_another_clients_resources(http_server, server_env, mode):
    server = http_server(tokens={"alice": ALICE, "bob": BOB},
                         env={"RETICLE_ALLOWED_ROOTS": gcd_env(server_env)["RETICLE_ALLOWED_ROOTS"]})
    with anyio.fail_after(600):
        async with http_client(server.url, ALICE, mode) as alice:
            heat = await check_evaluation_resources(alice)
            await check_viewer(alice)
            alices_jobs = await check_prompts(alice)
            async with http_client(server.url, BOB, mode) as bob:
                assert [str(r.uri) for r in await all_resources(bob)] == [VIEWER], "Bob made nothing"
                with pytest.raises(McpError) as foreign:
                    await bob.read_resource(heat)
                with pytest.raises(McpError) as unknown:
                    await bob.read_resource(heat.replace("heatmap.png", "no_such_file.png"))
                assert (foreign.value.error.code, foreign.value.error.message) == \
                    (unknown.value.error.code, unknown.value.error.message), \
                    "another client's URI fails as an unknown one"
                assert foreign.value.error.message == "Resource not found"
                # Nor are her jobs among Bob's completions.
                bobs = await bob.complete(PromptReference(type="ref/prompt", name="job_postmortem"),
                                          {"name": "job_id", "value": ""})
                assert not set(bobs.completion.values) & set(alices_jobs), bobs
            # Alice still reads her own.
            again = await alice.read_resource(heat)
            assert base64.b64decode(again.contents[0].blob).startswith(PNG_SIGNATURE)
