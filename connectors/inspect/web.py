"""The web view of an app's sessions (``eddies ui``): a small Starlette ASGI app over
``APP.events``, and one static page (``web.html``) that reads its JSON API.

What replay and fork do is not known here: the command passes them in, so the view
only shows what they answer. Example::

    app = create_app(settings, replay=functools.partial(replay_view, settings, plan))
    uvicorn.run(app, host="127.0.0.1", port=8321)

The API (a session id is one path segment, percent-encoded: ``a/b`` is ``a%2Fb``)::

    GET  /api/info                      the app, and whether replay and fork are offered
    GET  /api/sessions?q=ali            sessions whose id contains q, the latest first
    GET  /api/sessions/{id}             its timeline: every event, its summary and payload
    GET  /api/sessions/{id}/tree        its tree (runs, calls, latency, tokens, cost)
    GET  /api/sessions/{id}/stream      its answers as written and progress, as Server-Sent
                                        Events (delta, progress, approval, output; those of
                                        the last two minutes first)
    POST /api/sessions/{id}/replay      replay(id, from_seq, to_seq), body {} (all of it)
                                        or {"from_seq": 40, "to_seq": 52} (each optional)
    POST /api/sessions/{id}/fork        fork(id, at_seq, new_session), body
                                        {"at_seq": 3, "new_session": "alice-2"}
    POST /api/sessions/{id}/signal      signal(id, name, value), body {"name": "go",
                                        "value": {"by": "ana"}} (what eddies signal does)
    POST /api/sessions/{id}/approve     the answer to an approval request, body
    POST /api/sessions/{id}/reject      {"name": "approval:<call id>", "reason": "..."}
                                        (what eddies approve / reject do)
    GET  /api/evaluations               the evaluation reports kept for the app, the latest
                                        first (the Evaluations tab's list)
    GET  /evaluations/{id}              one of them as a page (what eddies eval --html writes)

A session's summary lists the signals its current run waits for (``waits``): the page
offers Approve / Reject for an approval's, Resume for a halt's, Send for any other.

POSTs must carry the header ``X-Eddies-UI: 1``: a page of another site cannot send it
without the browser asking this server first (CORS), which it never allows, so another
site open in the same browser cannot replay or fork. Requests must name an allowed host,
so a DNS-rebinding page cannot read the API either.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable, Sequence
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import orjson

from eddies.connectors.inspect.summary import detail_text
from eddies.connectors.inspect.tree import build_tree, render, scope_name
from eddies.engine.content import BLOCKS_KEY
from eddies.events import AgentEvent, DurableCallRequest, DurableCallResult, Event

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response

    from eddies.connectors.inspect.sessions import Recorded
    from eddies.connectors.inspect.stream_hub import SessionHub
    from eddies.connectors.runtime.settings import Settings

#: ``replay(session_id, from_seq, to_seq)`` (None: the first step, the last): plain data
#: with ``ok`` and ``steps`` (see ``replay_view``).
ReplayFn = Callable[[str, int | None, int | None], dict[str, Any]]
#: ``fork(session_id, at_seq, new_session)``: plain data, e.g. ``{"session": new_session}``.
ForkFn = Callable[[str, int, str], dict[str, Any]]
#: ``signal(session_id, name, value)``: sends the SignalEvent (delivered when it returns).
SignalFn = Callable[[str, str, Any], None]
#: ``evaluations()``: the app's kept evaluation reports, the latest first, as plain data
#: (``id``, ``time_ms``, ``title``, ``cases``, ``pass_rates``...: what the tab lists).
EvaluationsFn = Callable[[], list[dict[str, Any]]]
#: ``evaluation_page(id)``: the HTML page of a kept report (None: there is none of that id).
EvaluationPageFn = Callable[[str], "str | None"]

#: The header every POST must carry (see the module docstring).
POST_HEADER = "x-eddies-ui"
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")
NO_FORK = "fork is not available in this eddies ui (no fork function was given)"
_PREFIX = "/api/sessions/"
_log = logging.getLogger("eddies.ui")


class ApiError(Exception):
    """An answer other than 200: its status and message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def create_app(settings: Settings, *, replay: ReplayFn | None = None, fork: ForkFn | None = None,
               signal: SignalFn | None = None, allowed_hosts: Sequence[str] | None = LOCAL_HOSTS,
               fork_reason: str = NO_FORK, evaluations: EvaluationsFn | None = None,
               evaluation_page: EvaluationPageFn | None = None, hub: SessionHub | None = None) -> Starlette:
    """The ASGI app of the web view over ``settings.app``'s topics.

    ``signal``: how to answer a waiting session (None: the view only shows it).
    ``evaluations``, ``evaluation_page``: the Evaluations tab's list and pages (None: the
    tab says it is not available).
    ``hub``: the reader of the app's stream, for a running session's answer as it is
    written (None: the view shows none).
    ``allowed_hosts``: the Host header values served (None: any, for a server behind a
    proxy of its own). ``fork_reason``: the fork button's tooltip when ``fork`` is None.
    """
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.middleware.trustedhost import TrustedHostMiddleware
    from starlette.routing import Route

    from eddies.connectors.inspect.sessions import SessionIndex

    index = SessionIndex(settings)
    page = resources.files(__name__.rpartition(".")[0]).joinpath("web.html").read_text(encoding="utf-8")

    def home(request: Request) -> Response:
        from starlette.responses import HTMLResponse

        return HTMLResponse(page, headers={
            "Cache-Control": "no-store",
            # Everything it loads is its own; nobody frames it (clickjacking the buttons).
            "Content-Security-Policy": "default-src 'self'; script-src 'self' 'unsafe-inline'; "
                                       "style-src 'self' 'unsafe-inline'; frame-ancestors 'none'"})

    def info(request: Request) -> Response:
        return _json({"app": settings.app, "replay": replay is not None, "fork": fork is not None,
                      "fork_reason": "" if fork is not None else fork_reason,
                      "signal": signal is not None, "evaluations": evaluations is not None})

    def evaluation_list(request: Request) -> Response:
        if evaluations is None:
            return _json({"error": "evaluations are not available in this eddies ui"}, 501)
        return _guarded(lambda: {"evaluations": evaluations()})

    def evaluation(request: Request) -> Response:
        from starlette.responses import HTMLResponse, PlainTextResponse

        from eddies.connectors.runtime.preflight import PreflightError

        try:
            page = None if evaluation_page is None else evaluation_page(request.path_params["id"])
        except (PreflightError, LookupError, TimeoutError) as err:  # as _guarded answers the API's
            return PlainTextResponse(str(err), 503)
        if page is None:
            return PlainTextResponse(f"no evaluation {request.path_params['id']!r} of {settings.app}", 404)
        return HTMLResponse(page, headers={
            "Cache-Control": "no-store",
            # The report is static HTML of its own (no script), shown in the page's frame.
            "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
                                       "frame-ancestors 'self'"})

    def sessions(request: Request) -> Response:
        return _guarded(lambda: {"sessions": [s.to_dict() for s in index.refresh().search(
            request.query_params.get("q", ""), _limit(request.query_params.get("limit")))]})

    async def session(request: Request) -> Response:
        session_id, part = _target(request)
        if (request.method, part) == ("GET", "stream"):
            return live(session_id)
        body: Any = None
        if request.method == "POST":
            if request.headers.get(POST_HEADER) != "1":
                return _json({"error": f"a POST needs the header {POST_HEADER}: 1"}, 403)
            raw = await request.body()
            try:
                body = json.loads(raw) if raw.strip() else {}
            except ValueError:
                return _json({"error": "the body is not JSON"}, 400)
        from starlette.concurrency import run_in_threadpool

        # Kafka reads and replays block: off the event loop, as Starlette runs sync views.
        return await run_in_threadpool(_guarded, lambda: _answer(request.method, session_id, part, body))

    def _answer(method: str, session_id: str, part: str, body: Any) -> dict[str, Any]:
        if (method, part) == ("GET", ""):
            return timeline(settings, session_id)
        if (method, part) == ("GET", "tree"):
            return tree(settings, session_id)
        if (method, part) == ("POST", "replay"):
            if replay is None:
                raise ApiError(501, "replay is not available in this eddies ui")
            return replay(session_id, *_replay_args(body))
        if (method, part) == ("POST", "fork"):
            if fork is None:
                raise ApiError(501, fork_reason)
            at_seq, new_session = _fork_args(body)
            try:
                return fork(session_id, at_seq, new_session)
            except ValueError as err:  # a step the session does not have, its own id
                raise ApiError(400, str(err)) from None
        if method == "POST" and part in ("signal", "approve", "reject"):
            if signal is None:
                raise ApiError(501, "answering sessions is not available in this eddies ui")
            name, value = _signal_args(part, body)
            if part != "signal" and not (isinstance(body, dict) and body.get("keep") is True):
                _pending_or_refuse(settings, session_id, name)
            signal(session_id, name, value)
            return {"session": session_id, "signal": name, "value": value}
        raise ApiError(404 if part not in ("", "tree", "replay", "fork", "signal", "approve", "reject")
                       else 405,
                       f"no {method} /api/sessions/{{id}}{'/' + part if part else ''}")

    def live(session_id: str) -> Response:
        """The session's stream as Server-Sent Events (what the hub kept of it first)."""
        from starlette.responses import StreamingResponse

        from eddies.connectors.inspect.stream_events import session_events, sse_stream

        if hub is None:
            return _json({"error": "the app has no stream this eddies ui reads"}, 501)
        return StreamingResponse(sse_stream(session_events(hub, session_id, keep_s=hub.keep_s)),
                                 media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache"})

    def favicon(request: Request) -> Response:
        from starlette.responses import Response

        return Response(status_code=204)  # none: a browser's ask for one is not an error

    routes = [
        Route("/", home),
        Route("/favicon.ico", favicon),
        Route("/api/info", info),
        Route("/api/sessions", sessions),
        Route("/api/evaluations", evaluation_list),
        Route("/evaluations/{id}", evaluation),
        Route(_PREFIX + "{rest:path}", session, methods=["GET", "POST"]),
    ]
    middleware = [] if allowed_hosts is None else [
        Middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts))]
    return Starlette(routes=routes, middleware=middleware)


def timeline(settings: Settings, session_id: str) -> dict[str, Any]:
    """The session's summary and every event as a row (ApiError 404 if it has none)."""
    from eddies.connectors.inspect.sessions import summarize

    records = _history(settings, session_id)
    summary = summarize(session_id, records)
    return {**summary.to_dict(), "rows": [event_row(r) for r in records]}


def tree(settings: Settings, session_id: str) -> dict[str, Any]:
    """The session's tree, with wall-time latencies from the records' timestamps."""
    from eddies.connectors.inspect.sessions import wall_times

    records = _history(settings, session_id)
    roots = build_tree([r.event for r in records], wall_ms=wall_times(records))
    return {"id": session_id, "roots": [n.to_dict() for n in roots], "text": render(roots)}


def event_row(rec: Recorded) -> dict[str, Any]:
    """One timeline row: the envelope's fields, a one-line summary and the payload."""
    ev: AgentEvent = rec.event
    return {"offset": rec.offset, "time_ms": rec.time_ms, "seq": ev.seq, "run": ev.run,
            "type": ev.type, "scope": scope_name(ev.scope), "scope_path": list(ev.scope),
            "action": ev.action, "summary": detail_text(ev), "event_id": ev.event_id,
            "causation_id": ev.causation_id, "agent": ev.agent, "timestamp": ev.timestamp,
            "payload": payload_data(ev.payload)}


def payload_data(payload: Event) -> Any:
    """The payload's fields as plain data; a call's arguments and a result's value (JSON
    text on the wire, so that replay compares their digests) are shown decoded::

        payload_data(DurableCallResult(call_id="c1", value="3"))["value"]   # 3
    """
    if dataclasses.is_dataclass(payload):
        data: Any = dataclasses.asdict(payload)
    elif callable(dump := getattr(payload, "model_dump", None)):
        data = dump(mode="json")
    else:
        data = dict(getattr(payload, "__dict__", {}))
    if isinstance(payload, DurableCallRequest):
        data["args"] = _decoded(payload.args)
    elif isinstance(payload, DurableCallResult):
        data["value"] = _decoded(payload.value)
    return _without_bytes(data)


def _without_bytes(data: Any) -> Any:
    """``data`` with the bytes of content blocks (raw, or base64 under ``data`` in a
    block's JSON) as placeholders: the page says what they were, and stays small."""
    if isinstance(data, bytes):
        return f"<{len(data)} bytes>"
    if isinstance(data, list):
        return [_without_bytes(x) for x in data]
    if not isinstance(data, dict):
        return data
    out = {k: _without_bytes(v) for k, v in data.items()}
    if isinstance(out.get(BLOCKS_KEY), list):
        out[BLOCKS_KEY] = [{**b, "data": None if b.get("data") is None else f"<{b.get('size')} bytes>"}
                           if isinstance(b, dict) else b for b in out[BLOCKS_KEY]]
    return out


def _decoded(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _history(settings: Settings, session_id: str) -> list[Recorded]:
    from eddies.connectors.inspect.sessions import timed_history

    records = timed_history(settings, session_id)
    if not records:
        raise ApiError(404, f"no session {session_id!r} in {settings.app}.events")
    return records


def _target(request: Request) -> tuple[str, str]:
    """(session id, what of it) from the raw path: the decoded one would turn the id
    ``a/tree`` (``a%2Ftree``) into session ``a``'s tree."""
    raw = request.scope.get("raw_path")
    path = raw.decode("latin-1") if isinstance(raw, bytes) else request.url.path
    rest = path.split(_PREFIX, 1)[-1]
    parts = rest.split("/")
    return unquote(parts[0]), "/".join(parts[1:])


def _seq(body: dict[str, Any], key: str, optional: bool = False) -> int | None:
    """``body[key]``, a step's sequence number (None if ``optional`` and absent or null)."""
    seq = body.get(key)
    if seq is None and optional:
        return None
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
        raise ApiError(400, f"{key}: a step's sequence number (1 or more){', or null' if optional else ''}")
    return seq


def _replay_args(body: Any) -> tuple[int | None, int | None]:
    if not isinstance(body, dict):
        raise ApiError(400, 'the body must be {}, or {"from_seq": N, "to_seq": M} (each optional)')
    start, end = _seq(body, "from_seq", optional=True), _seq(body, "to_seq", optional=True)
    if start is not None and end is not None and end < start:
        raise ApiError(400, f"to_seq {end} comes before from_seq {start}")
    return start, end


def _fork_args(body: Any) -> tuple[int, str]:
    if not isinstance(body, dict):
        raise ApiError(400, 'the body must be {"at_seq": N, "new_session": "id"}')
    at_seq, new_session = _seq(body, "at_seq"), body.get("new_session")
    assert at_seq is not None  # not optional: _seq raised otherwise
    if not isinstance(new_session, str) or not new_session.strip():
        raise ApiError(400, "new_session: the id of the new session")
    return at_seq, new_session.strip()


def _pending_or_refuse(settings: Settings, session_id: str, name: str) -> None:
    """409 unless the session waits on approval ``name`` (as ``eddies approve`` checks):
    a page left open answers a call another person answered since ({"keep": true} sends
    it anyway)."""
    from eddies.connectors.inspect.sessions import summarize, timed_history
    from eddies.events import ApprovalRequestEvent

    pending = summarize(session_id, timed_history(settings, session_id)).approvals
    if not any(isinstance(ev.payload, ApprovalRequestEvent) and ev.payload.signal == name for ev in pending):
        waits = ", ".join(ev.payload.signal for ev in pending
                          if isinstance(ev.payload, ApprovalRequestEvent)) or "none"
        raise ApiError(409, f"no approval is pending with that id: {name} (pending: {waits})")


def _signal_args(part: str, body: Any) -> tuple[str, Any]:
    """(signal name, value) of a signal, approve or reject POST."""
    from eddies.engine import approval

    if not isinstance(body, dict) or not isinstance(body.get("name"), str) or not body["name"].strip():
        raise ApiError(400, 'the body must be {"name": "...", ' + (
            '"value": ...}' if part == "signal" else '"reason": "..."} (the reason optional)'))
    name = body["name"].strip()
    if part == "signal":
        return name, body.get("value")
    if not name.startswith(approval.PREFIX):
        raise ApiError(400, f"{name!r} is not an approval signal: it starts with {approval.PREFIX!r}")
    reason = body.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise ApiError(400, "reason: text, or null")
    return name, approval.answer(part == "approve", reason.strip() if reason else None)


def _limit(text: str | None) -> int | None:
    try:
        return max(1, int(text)) if text else None
    except ValueError:
        raise ApiError(400, f"limit: {text!r} is not a number") from None


def _guarded(make: Callable[[], dict[str, Any]]) -> Response:
    """``make()`` as JSON, or its error as ``{"error": ...}`` with a status, so the page
    can say what went wrong (a missing topic, a broker that does not answer)."""
    from eddies.connectors.runtime.preflight import PreflightError

    try:
        return _json(make())
    except ApiError as err:
        return _json({"error": str(err)}, err.status)
    except (PreflightError, LookupError, TimeoutError) as err:
        return _json({"error": str(err)}, 503)
    except Exception as err:
        _log.exception("web view request failed")
        return _json({"error": f"{type(err).__name__}: {err}"}, 500)


def _json(data: Any, status: int = 200) -> Response:
    from starlette.responses import Response

    # orjson: dataclasses, enums and non-string keys as they are; anything else as text.
    return Response(orjson.dumps(data, default=str, option=orjson.OPT_NON_STR_KEYS), status,
                    media_type="application/json", headers={"Cache-Control": "no-store"})
