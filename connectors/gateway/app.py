"""``eddies serve``: an HTTP front door over an app's topics, for programs that do not
speak Kafka. A Starlette app, served by uvicorn (the ``serve`` extra); it holds no state
of its own, so any number of them run behind a load balancer. Example::

    app = create_gateway(settings, tokens=Tokens.parse("s3cret"))
    uvicorn.run(app, host="127.0.0.1", port=8000)

The API (a session id is one path segment, percent-encoded)::

    POST /v1/sessions/{id}/inputs          send an input: a JSON body {"input": VALUE}, or
                                           text. Idempotency-Key: a retried POST with the
                                           same key is one input. Answers 202
                                           {"session_id", "event_id"}; with
                                           Accept: text/event-stream, the run's events
                                           as they come, until its output
    GET  /v1/sessions/{id}/events          the session's events as Server-Sent Events:
                                           delta, progress, approval, output (?until=output:
                                           end after the next output; ?keep=S: also those
                                           of the last S seconds the door kept)
    POST /v1/sessions/{id}/approvals/{signal}  {"approved": true|false, "reason": "..."}
    POST /v1/sessions/{id}/signals/{name}      {"value": VALUE}
    GET  /v1/sessions/{id}/history         the session's recorded events (APP.events)
    POST /v1/chat/completions              OpenAI-compatible (see openai_api.py)
    GET  /healthz                          200 once the door reads the app's topics

With tokens configured, every /v1 request needs ``Authorization: Bearer TOKEN`` (401
without a known one, and nothing is produced) and a token limited to a prefix reaches
only sessions whose id starts with it (403).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from eddies.connectors.gateway.openai_api import (
    SESSION_HEADER,
    RequestError,
    answer_text,
    completion,
    error_body,
    question,
    streamed,
)
from eddies.connectors.gateway.sending import DeliveryError, InputSender, idempotent_id
from eddies.connectors.gateway.tokens import Tokens
from eddies.connectors.inspect.stream_events import session_events, sse_stream
from eddies.connectors.inspect.stream_hub import SessionHub
from eddies.connectors.runtime.client import input_event, signal_event
from eddies.connectors.runtime.settings import Settings
from eddies.connectors.runtime.signing import ResultSigner
from eddies.engine.approval import answer as approval_answer

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response

#: How long a request waits for its run's output (a chat completion, a followed input).
ANSWER_TIMEOUT_S = 300.0


class HttpError(Exception):
    """An answer other than success: its status, and a message for the client."""

    def __init__(self, status: int, message: str, kind: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind


def create_gateway(settings: Settings, *, tokens: Tokens | None = None,
                   hub: SessionHub | None = None, sender: InputSender | None = None,
                   answer_timeout_s: float = ANSWER_TIMEOUT_S,
                   signer: ResultSigner | None = None) -> Starlette:
    """The door's ASGI app over app ``settings.app``: the hub and sender are started when
    the app starts (given ones are used as they are), and closed when it stops. The
    inputs of a token that proves who asks carry that identity, signed by ``signer`` (the
    identity key's; without it the workers clear it)."""
    import contextlib

    from starlette.applications import Starlette
    from starlette.responses import JSONResponse, StreamingResponse
    from starlette.routing import Route

    keys = tokens or Tokens({})
    parts: dict[str, Any] = {"hub": hub, "sender": sender}

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        import asyncio

        own = [name for name in ("hub", "sender") if parts[name] is None]
        if parts["hub"] is None:
            parts["hub"] = await asyncio.to_thread(lambda: SessionHub(settings).start())
        if parts["sender"] is None:
            parts["sender"] = InputSender(settings, signer)
        try:
            yield
        finally:
            for name in own:
                await asyncio.to_thread(parts[name].close)

    def allowed(request: Request, session_id: str) -> None:
        if not keys:
            return
        prefix = keys.prefix(_bearer(request))
        if prefix is None:
            raise HttpError(401, "a known bearer token is needed (Authorization: Bearer TOKEN)",
                            "authentication_error")
        if not session_id.startswith(prefix):
            raise HttpError(403, f"this token reaches only sessions whose id starts with {prefix!r}",
                            "permission_error")

    def session_of(request: Request) -> str:
        session_id = unquote(request.path_params["session"])
        if not session_id:
            raise HttpError(400, "the session id is empty")
        allowed(request, session_id)
        return session_id

    async def body_json(request: Request) -> Any:
        raw = await request.body()
        if not raw:
            return {}
        try:
            return json.loads(raw)
        except ValueError:
            raise HttpError(400, "the body is not JSON") from None

    async def send(event: Any) -> None:
        try:
            await parts["sender"].send(event)
        except DeliveryError as err:
            raise HttpError(503, f"the broker did not take it: {err}", "service_unavailable") from None

    def events_response(events: AsyncIterator[tuple[str, dict[str, Any]]],
                        headers: dict[str, str]) -> Response:
        return StreamingResponse(sse_stream(events), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no", **headers})

    async def inputs(request: Request) -> Response:
        session_id = session_of(request)
        if request.headers.get("content-type", "").startswith("application/json"):
            body = await body_json(request)
            if not isinstance(body, dict) or "input" not in body:
                raise HttpError(400, 'a JSON body must be an object with "input"')
            value = body["input"]
        else:
            value = (await request.body()).decode("utf-8", errors="replace")
        key = request.headers.get("idempotency-key")
        event_id = idempotent_id(session_id, key)
        event = input_event(session_id, value, event_id, identity=keys.identity(_bearer(request)))
        headers = {"X-Eddies-Event-Id": event_id}
        if "text/event-stream" in request.headers.get("accept", ""):
            events = session_events(parts["hub"], session_id, input_id=event_id, since_ms=event.timestamp,
                                    until_output=True)
            first = await _started(events, send(event))
            return events_response(first, headers)
        await send(event)
        return JSONResponse({"session_id": session_id, "event_id": event_id}, status_code=202,
                            headers=headers)

    async def follow(request: Request) -> Response:
        session_id = session_of(request)
        until = request.query_params.get("until") == "output"
        try:
            keep = float(request.query_params.get("keep", "0"))
        except ValueError:
            raise HttpError(400, "keep: a number of seconds") from None
        return events_response(session_events(parts["hub"], session_id, until_output=until,
                                               keep_s=max(0.0, keep)), {})

    async def approvals(request: Request) -> Response:
        session_id = session_of(request)
        body = await body_json(request)
        if not isinstance(body, dict) or not isinstance(body.get("approved"), bool):
            raise HttpError(400, 'the body must be {"approved": true|false, "reason": "..."}')
        reason = body.get("reason")
        name = unquote(request.path_params["name"])
        await send(signal_event(session_id, name, approval_answer(body["approved"], reason
                                                                  if isinstance(reason, str) else None)))
        return JSONResponse({"session_id": session_id, "signal": name}, status_code=202)

    async def signals(request: Request) -> Response:
        session_id = session_of(request)
        body = await body_json(request)
        if not isinstance(body, dict) or "value" not in body:
            raise HttpError(400, 'the body must be {"value": VALUE}')
        name = unquote(request.path_params["name"])
        await send(signal_event(session_id, name, body["value"]))
        return JSONResponse({"session_id": session_id, "signal": name}, status_code=202)

    async def history(request: Request) -> Response:
        import asyncio

        from eddies.connectors.inspect.web import timeline

        session_id = session_of(request)
        return JSONResponse(await asyncio.to_thread(timeline, settings, session_id))

    async def chat_completions(request: Request) -> Response:
        import asyncio

        body = await body_json(request)
        try:
            text = question(body)
        except RequestError as err:
            raise HttpError(400, str(err)) from None
        named = request.headers.get(SESSION_HEADER) or (body.get("user") if isinstance(body.get("user"), str)
                                                        else None)
        if named is None:
            prefix = keys.prefix(_bearer(request)) if keys else ""
            named = f"{prefix or ''}chat-{uuid.uuid4().hex[:12]}"
        allowed(request, named)
        key = request.headers.get("idempotency-key")
        event_id = idempotent_id(named, key)
        event = input_event(named, text, event_id, identity=keys.identity(_bearer(request)))
        model = str(body.get("model") or settings.app)
        completion_id = f"chatcmpl-{event_id}"
        events = session_events(parts["hub"], named, input_id=event_id, since_ms=event.timestamp,
                                until_output=True)
        headers = {SESSION_HEADER: named}
        first = await _started(events, send(event))
        if body.get("stream"):
            return StreamingResponse(streamed(first, completion_id, model), media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache", **headers})
        try:
            async with asyncio.timeout(answer_timeout_s):
                async for name, data in first:
                    if name == "output":
                        if data["error"] is not None:
                            raise HttpError(500, f"{data['error']['type']}: {data['error']['message']}",
                                            "agent_error")
                        return JSONResponse(completion(completion_id, model, answer_text(data)),
                                            headers=headers)
        except TimeoutError:
            raise HttpError(504, f"no answer within {answer_timeout_s:g} s", "timeout") from None
        raise HttpError(502, "the answer's stream ended without an output", "agent_error")

    async def healthz(request: Request) -> Response:
        hub_ = parts["hub"]
        ok = hub_ is not None and hub_.ready.is_set()
        return JSONResponse({"ok": ok, "app": settings.app}, status_code=200 if ok else 503)

    def guarded(handler: Any) -> Any:
        async def run(request: Request) -> Response:
            try:
                response: Response = await handler(request)
                return response
            except HttpError as err:
                return JSONResponse(error_body(err.message, err.kind), status_code=err.status)

        return run

    routes = [
        Route("/v1/sessions/{session}/inputs", guarded(inputs), methods=["POST"]),
        Route("/v1/sessions/{session}/events", guarded(follow), methods=["GET"]),
        Route("/v1/sessions/{session}/approvals/{name}", guarded(approvals), methods=["POST"]),
        Route("/v1/sessions/{session}/signals/{name}", guarded(signals), methods=["POST"]),
        Route("/v1/sessions/{session}/history", guarded(history), methods=["GET"]),
        Route("/v1/chat/completions", guarded(chat_completions), methods=["POST"]),
        Route("/healthz", healthz, methods=["GET"]),
    ]
    return Starlette(routes=routes, lifespan=lifespan)


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    return header[7:].strip() if header[:7].lower() == "bearer " else None


async def _started(events: AsyncIterator[tuple[str, dict[str, Any]]], sending: Any
                   ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """``events`` subscribed before ``sending`` is awaited (so nothing the input causes is
    missed), then read: the first step of the generator registers the follower."""
    import asyncio

    queue: asyncio.Queue[tuple[str, dict[str, Any]] | None] = asyncio.Queue()

    async def pump() -> None:
        try:
            async for item in events:
                await queue.put(item)
        finally:
            await queue.put(None)

    task = asyncio.create_task(pump())
    await asyncio.sleep(0)  # the pump's first step: the follower is registered
    try:
        await sending
    except BaseException:
        task.cancel()
        raise

    async def read() -> AsyncIterator[tuple[str, dict[str, Any]]]:
        try:
            while (item := await queue.get()) is not None:
                yield item
        finally:
            task.cancel()

    return read()


