"""A2A agents for tests, on the official ``a2a-sdk`` (1.x), over JSON-RPC on 127.0.0.1.

``python -m tests.a2a_servers echo PORT LOG``: the agent "Echo Agent" (card at
``/.well-known/agent-card.json``). Each message is a task: it appends ``<idempotency key
from the message metadata> <text>`` to LOG, a JSON line of the request's Idempotency-Key,
Authorization, X-Token, Eddies-User and Eddies-Tenant headers to LOG.headers, and its
arrival time (seconds since the epoch) to LOG.times; then it completes the task with
one artifact of text ``echo: <text>``, or, when the text contains "fail",
fails it with the status message ``cannot do: <text>``; "data" completes it with one
data part ``{"echo": <text>, "n": 1}``; "slow" sleeps 3 s first, on a key's first call
only. With ``A2A_TEST_TOKEN`` set, a request without ``Authorization: Bearer <token>``
(the card's too) gets HTTP 401.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

IDEMPOTENCY_META = "io.eddies/idempotency-key"


def echo(port: int, log: Path) -> None:
    import uvicorn
    from a2a.helpers import new_data_part
    from a2a.server.agent_execution import AgentExecutor, RequestContext
    from a2a.server.events import EventQueue
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
    from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
    from a2a.types import (
        AgentCapabilities,
        AgentCard,
        AgentInterface,
        AgentSkill,
        Part,
        Task,
        TaskState,
        TaskStatus,
    )
    from google.protobuf.json_format import MessageToDict
    from starlette.applications import Starlette

    seen: set[str] = set()

    class Echo(AgentExecutor):
        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            message = context.message
            assert message is not None and context.task_id and context.context_id
            text = context.get_user_input()
            key = MessageToDict(message.metadata).get(IDEMPOTENCY_META, "-")
            headers = context.call_context.state.get("headers", {})
            with log.open("a") as fh:
                fh.write(f"{key} {text}\n")
            with Path(f"{log}.times").open("a") as fh:
                fh.write(f"{time.time():.3f}\n")
            with Path(f"{log}.headers").open("a") as fh:
                fh.write(json.dumps({h: headers.get(h) for h in ("idempotency-key", "authorization",
                                                                 "x-token", "eddies-user",
                                                                 "eddies-tenant")}) + "\n")
            await event_queue.enqueue_event(Task(
                id=context.task_id, context_id=context.context_id,
                status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED), history=[message]))
            updater = TaskUpdater(event_queue, context.task_id, context.context_id)
            await updater.start_work()
            if "slow" in text and key not in seen:
                seen.add(key)
                await asyncio.sleep(3)
            if "fail" in text:
                await updater.failed(updater.new_agent_message([Part(text=f"cannot do: {text}")]))
                return
            part = new_data_part({"echo": text, "n": 1}) if "data" in text else Part(text=f"echo: {text}")
            await updater.add_artifact([part], name="echo", last_chunk=True)
            await updater.complete()

        async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
            await TaskUpdater(event_queue, context.task_id or "", context.context_id or "").cancel()

    card = AgentCard(
        name="Echo Agent",
        description="Repeats what it is told.",
        version="1.0.0",
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text"],
        default_output_modes=["text"],
        skills=[AgentSkill(id="echo", name="Echo", description="Repeats the message.", tags=["echo"])],
        supported_interfaces=[AgentInterface(protocol_binding="JSONRPC", protocol_version="1.0",
                                             url=f"http://127.0.0.1:{port}/a2a/jsonrpc")],
    )
    handler = DefaultRequestHandler(agent_executor=Echo(), task_store=InMemoryTaskStore(), agent_card=card)
    app: Any = Starlette(routes=[*create_agent_card_routes(card),
                                 *create_jsonrpc_routes(handler, rpc_url="/a2a/jsonrpc")])
    token = os.environ.get("A2A_TEST_TOKEN")
    if token:
        app = _bearer_only(app, token)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def _bearer_only(app: Any, token: str) -> Any:
    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        sent = dict(scope.get("headers", [])).get(b"authorization")
        if scope["type"] == "http" and sent != f"Bearer {token}".encode():
            await send({"type": "http.response.start", "status": 401,
                        "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"unauthorized"})
            return
        await app(scope, receive, send)
    return guarded


def main() -> None:
    kind, port = sys.argv[1], int(sys.argv[2])
    if kind != "echo":
        raise SystemExit(f"unknown server {kind!r}")
    echo(port, Path(sys.argv[3]))


if __name__ == "__main__":
    main()
