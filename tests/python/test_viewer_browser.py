"""The MCP Apps viewer (`ui://reticle/viewer`, issue 30 item 5) in a real headless Chromium
(Debian's `chromium`, driven by Playwright), behind a minimal host harness.

The harness is a page that plays the MCP Apps host: it loads the viewer's HTML (read from
the server with `resources/read`) into a sandboxed iframe and speaks the app's JSON-RPC
over `postMessage`. It answers `ui/initialize` itself and forwards every other request
(`resources/read`, `tools/call`) to the real `reticle` server through the Python SDK client
(a Playwright binding). The test loads a finished evaluation into the viewer, clicks a
violation, asserts that the details shown equal the record, triggers "fix this", and
asserts the `optimize` call the viewer made and the result it shows. Screenshots are saved
under target/test-artifacts/viewer/."""

import json
import os
import shutil

import anyio
import pytest
from mcp import Client

from conftest import LAYOUT, ROOT, params

pytestmark = pytest.mark.anyio

VIEWER = "ui://reticle/viewer"
SHOTS = ROOT / "target" / "test-artifacts" / "viewer"

HARNESS = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>host harness</title>
<style>body{margin:0} iframe{width:1100px;height:640px;border:0}</style></head>
<body><iframe id="app" sandbox="allow-scripts"></iframe>
<script>
const frame = document.getElementById('app');
window.hostLog = [];
let toolInput = null, toolResult = null;
function toApp(message) { frame.contentWindow.postMessage(message, '*'); }
window.addEventListener('message', async (event) => {
  if (event.source !== frame.contentWindow) return;
  const m = event.data;
  window.hostLog.push(m);
  if (m.method === 'ui/initialize') {
    toApp({jsonrpc: '2.0', id: m.id, result: {protocolVersion: '2026-01-26',
      hostInfo: {name: 'reticle-test-harness', version: '1'},
      hostCapabilities: {serverTools: {}, serverResources: {}, logging: {}},
      hostContext: {theme: 'light', displayMode: 'inline', platform: 'web'}}});
  } else if (m.method === 'ui/notifications/initialized') {
    toApp({jsonrpc: '2.0', method: 'ui/notifications/tool-input', params: {arguments: toolInput}});
    toApp({jsonrpc: '2.0', method: 'ui/notifications/tool-result', params: toolResult});
  } else if (m.id !== undefined && m.method && !m.method.startsWith('ui/')) {
    const answer = await window.mcpForward(JSON.stringify({method: m.method, params: m.params}));
    const parsed = JSON.parse(answer);
    toApp(parsed.error ? {jsonrpc: '2.0', id: m.id, error: parsed.error}
                       : {jsonrpc: '2.0', id: m.id, result: parsed.result});
  }
});
window.startApp = (html, input, result) => {
  toolInput = input; toolResult = result;
  frame.srcdoc = html;
};
</script></body></html>"""


def chromium() -> str:
    """Debian's chromium (scripts/setup.sh test installs it); missing is a failure."""
    path = os.environ.get("CHROMIUM_BIN") or shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.fail("chromium is not installed: run scripts/setup.sh test (apt-get install chromium)")
    return path


def wire(model):
    """An SDK result as the JSON the server sent."""
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


async def test_the_viewer_shows_an_evaluation_and_fixes_a_violation(reticle_bin, server_env):
    try:
        from playwright.async_api import async_playwright
    except ImportError:
        pytest.fail("playwright is not installed in the test venv: run scripts/setup.sh test")
    SHOTS.mkdir(parents=True, exist_ok=True)
    for old in SHOTS.glob("*.png"):
        old.unlink()
    forwarded, answers = [], []

    with anyio.fail_after(600):
        async with Client(params(reticle_bin, server_env), mode="legacy") as client:
            arguments = {"layout": str(LAYOUT), "deck": "iccad13_m1", "tiling": "tiles",
                         "pixel_nm": 8, "report_level": "detailed", "wait": True}
            evaluated = await client.call_tool("evaluate", arguments)
            assert not evaluated.is_error, evaluated.structured_content
            records = evaluated.structured_content["violations"]
            assert records, "the evaluation lists no violation to click"
            page_html = (await client.read_resource(VIEWER)).contents[0].text

            async def forward(message: str) -> str:
                """The harness's bridge: one app request to the real server."""
                request = json.loads(message)
                forwarded.append(request)
                method, p = request["method"], request.get("params") or {}
                try:
                    if method == "tools/call":
                        result = await client.call_tool(p["name"], p.get("arguments") or {})
                    elif method == "resources/read":
                        result = await client.read_resource(p["uri"])
                    else:
                        return json.dumps({"error": {"code": -32601, "message": f"harness: {method}"}})
                except Exception as e:  # an MCP error goes back to the app as an error
                    return json.dumps({"error": {"code": -32000, "message": str(e)}})
                answers.append((method, result))
                return json.dumps({"result": wire(result)})

            async with async_playwright() as pw:
                browser = await pw.chromium.launch(executable_path=chromium(),
                                                   args=["--no-sandbox", "--disable-gpu"])
                try:
                    page = await browser.new_page(viewport={"width": 1120, "height": 680})
                    errors = []
                    page.on("pageerror", lambda e: errors.append(str(e)))
                    await page.expose_function("mcpForward", forward)
                    await page.set_content(HARNESS)
                    await page.evaluate("([html, input, result]) => window.startApp(html, input, result)",
                                        [page_html, arguments, wire(evaluated)])
                    app = page.frame_locator("#app")

                    # The evaluation is shown: the heat map was read through the host, and
                    # the violations in view are listed.
                    await app.locator("#list li").first.wait_for(timeout=30_000)
                    listed = await app.locator("#list li").count()
                    assert listed == len(records), (listed, len(records))
                    heat_reads = [f for f in forwarded if f["method"] == "resources/read"]
                    assert heat_reads and heat_reads[0]["params"]["uri"].endswith("/heatmap.png"), forwarded
                    await page.screenshot(path=str(SHOTS / "1_evaluation.png"))

                    # Zooming in shows no more violations than the whole view.
                    await app.locator("#zoomIn").click()
                    zoomed = int(await app.locator("#visible").inner_text())
                    assert zoomed <= listed
                    await app.locator("#reset").click()
                    await app.locator("#list li").first.wait_for()

                    # Click a violation: the details are the record.
                    item = app.locator("#list li").first
                    clicked_id = await item.get_attribute("data-violation-id")
                    await item.click()
                    shown = json.loads(await app.locator("#record").inner_text())
                    record = next(r for r in records if r["violation_id"] == clicked_id)
                    assert shown == record
                    await page.screenshot(path=str(SHOTS / "2_record.png"))

                    # Fix this: the viewer calls optimize through the host, and shows its result.
                    await app.locator("#fix").click()
                    await app.locator("#compareStatus").wait_for(timeout=300_000)
                    calls = [f for f in forwarded if f["method"] == "tools/call"]
                    assert len(calls) == 1, calls
                    assert calls[0]["params"]["name"] == "optimize"
                    assert calls[0]["params"]["arguments"]["violation_id"] == clicked_id
                    assert calls[0]["params"]["arguments"]["scope"] == "record_only"
                    optimized = next(r for m, r in answers if m == "tools/call")
                    assert not optimized.is_error, optimized.structured_content
                    assert optimized.structured_content["status"] == "completed"
                    status = app.locator("#compareStatus")
                    assert await status.get_attribute("data-is-error") == "false"
                    text = await status.inner_text()
                    assert optimized.structured_content["job_id"] in text, text
                    # The after image shown is the result's image block.
                    blocks = [b for b in optimized.content if b.type == "image"]
                    shown_images = app.locator("#compare img")
                    assert await shown_images.count() == len(blocks) >= 1
                    src = await shown_images.first.get_attribute("src")
                    assert src.endswith(blocks[0].data), "the viewer shows the result's image"
                    resolved = optimized.structured_content.get("violations_resolved")
                    if resolved is not None:
                        done = sum(1 for v in resolved if v["resolved"])
                        assert f"{done} of {len(resolved)} violation(s) resolved" in \
                            await app.locator("#compare").inner_text()
                    await app.locator("#compare").scroll_into_view_if_needed()
                    await page.screenshot(path=str(SHOTS / "3_fixed.png"))

                    # Fix this region: zoomed in, the viewer repairs the visible box of the
                    # evaluated layout (the tool input's layout and deck).
                    await app.locator("#zoomIn").click()
                    await app.locator("#zoomIn").click()
                    first_job = optimized.structured_content["job_id"]
                    await app.locator("#fixRegion").click()
                    await app.locator("#compareStatus").filter(has_not_text=first_job).wait_for(timeout=300_000)
                    calls = [f for f in forwarded if f["method"] == "tools/call"]
                    assert len(calls) == 2, calls
                    region_args = calls[1]["params"]["arguments"]
                    assert calls[1]["params"]["name"] == "optimize"
                    assert (region_args["layout"], region_args["deck"]) == (arguments["layout"], arguments["deck"])
                    box = region_args["box_um"]
                    whole = [v / 1000 for v in evaluated.structured_content["region"]["box_nm"]]
                    assert len(box) == 4 and box[0] < box[2] and box[1] < box[3], box
                    assert (box[2] - box[0]) < (whole[2] - whole[0]), (box, whole)
                    region_answer = [r for m, r in answers if m == "tools/call"][1]
                    shown = await app.locator("#compareStatus").inner_text()
                    if region_answer.is_error:
                        code = region_answer.structured_content["error"]["code"]
                        assert code in shown, (code, shown)
                    else:
                        assert region_answer.structured_content["job_id"] in shown, shown
                    await app.locator("#compare").scroll_into_view_if_needed()
                    await page.screenshot(path=str(SHOTS / "4_region.png"))
                    assert not errors, errors
                finally:
                    await browser.close()
    print(f"\nviewer screenshots: {sorted(p.name for p in SHOTS.glob('*.png'))} in {SHOTS}")
