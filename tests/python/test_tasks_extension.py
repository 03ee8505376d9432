"""The 2026-07-28 tasks extension (`io.modelcontextprotocol/tasks`) with the real Python SDK.

mcp 2.3.0 ships no tasks client: its 2025-11-25 task types are "types only" (a
task-augmented `tools/call` answer fails the SDK's own CallToolResult validation), and
it has no built-in 2026 tasks extension. It does have the generic client-extension
hook (`ClientExtension` + `ResultClaim` on `resultType`), which is how an SDK user adds
an extension. This test is such a user: a minimal tasks extension that advertises
`io.modelcontextprotocol/tasks` per request, claims `resultType: "task"` on
`tools/call`, and resolves it by polling `tasks/get` through the SDK session until the
result is inlined. The host must then hand back the same result as a plain call.
"""

from typing import Any, Literal

import anyio
import pytest
from mcp import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp_types import CallToolResult, Request, RequestParams, Result

from conftest import LAYOUT, ROOT, params

TASKS = "io.modelcontextprotocol/tasks"

pytestmark = pytest.mark.anyio


class TaskHandle(Result):
    """The extension's CreateTaskResult (`resultType: "task"`)."""

    result_type: Literal["task"]
    task_id: str
    status: str
    created_at: str
    last_updated_at: str
    ttl_seconds: int | None
    poll_interval_milliseconds: int | None = None


class DetailedTask(Result):
    """`tasks/get` under the extension: the task, with the call's result once completed."""

    task_id: str
    status: str
    status_message: str | None = None
    result: dict[str, Any] | None = None


class TaskIdParams(RequestParams):
    task_id: str


class GetTask(Request[TaskIdParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskIdParams


class CancelTask(Request[TaskIdParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskIdParams


class TasksExtension(ClientExtension):
    identifier = TASKS

    def __init__(self) -> None:
        self.handles: list[TaskHandle] = []
        self.polls: list[str] = []

    def claims(self):
        return [ResultClaim(result_type="task", model=TaskHandle, resolve=self.resolve)]

    async def resolve(self, handle: TaskHandle, ctx: ClaimContext) -> CallToolResult:
        self.handles.append(handle)
        interval = (handle.poll_interval_milliseconds or 1000) / 1000
        with anyio.fail_after(240):
            while True:
                task = await ctx.session.send_request(
                    GetTask(params=TaskIdParams(task_id=handle.task_id)), DetailedTask
                )
                self.polls.append(task.status)
                if task.status == "completed":
                    return CallToolResult.model_validate(task.result)
                assert task.status == "working", task
                await anyio.sleep(min(interval, 0.2))


async def test_sdk_extension_resolves_a_task_to_the_plain_result(reticle_bin, server_env):
    extension = TasksExtension()
    with anyio.fail_after(300):
        async with Client(params(reticle_bin, server_env), mode="auto", extensions=[extension]) as client:
            assert client.session.protocol_version == "2026-07-28"
            discovered = client.session.discover_result.capabilities
            assert TASKS in (discovered.extensions or {}), discovered
            args = {"layout": str(LAYOUT), "render": "json"}
            via_task = await client.call_tool("simulate", args)
            # The host elected a task (the call did not ask to wait) and the
            # extension polled it to completion.
            assert len(extension.handles) == 1, extension.handles
            handle = extension.handles[0]
            assert handle.task_id.startswith("job_"), handle
            assert handle.status == "working"
            assert extension.polls[-1] == "completed", extension.polls
            assert not via_task.is_error, via_task
            plain = await client.call_tool("simulate", {**args, "wait": True})
            assert not plain.is_error, plain
            assert len(extension.handles) == 1, "a waiting call must not become a task"
            a, b = via_task.structured_content, plain.structured_content
            assert a["job_id"] == handle.task_id
            assert a["metrics"] == b["metrics"]
            assert a["grid"] == b["grid"]


class CancellingTasksExtension(TasksExtension):
    """Cancels the task it is handed, then reads it back."""

    def __init__(self) -> None:
        super().__init__()
        self.after_cancel: DetailedTask | None = None

    async def resolve(self, handle: TaskHandle, ctx: ClaimContext) -> CallToolResult:
        self.handles.append(handle)
        ids = TaskIdParams(task_id=handle.task_id)
        await ctx.session.send_request(CancelTask(params=ids), Result)
        self.after_cancel = await ctx.session.send_request(GetTask(params=ids), DetailedTask)
        return CallToolResult(content=[], is_error=True)


async def test_sdk_cancels_a_task_and_it_reads_cancelled(reticle_bin, server_env):
    extension = CancellingTasksExtension()
    with anyio.fail_after(300):
        async with Client(params(reticle_bin, server_env), mode="auto", extensions=[extension]) as client:
            result = await client.call_tool("simulate", {"layout": str(LAYOUT), "pixel_nm": 0.5})
            assert result.is_error
            assert len(extension.handles) == 1
            task = extension.after_cancel
            assert task is not None and task.status == "cancelled", task
            assert task.result is None
            # The job table agrees: the `poll` tool reads the same job as cancelled.
            polled = await client.call_tool("poll", {"job_id": extension.handles[0].task_id, "render": "json"})
            assert polled.structured_content["status"] == "cancelled", polled
