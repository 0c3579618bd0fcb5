"""A local OpenAI-compatible chat-completions and embeddings server for tests (real HTTP,
stdlib only).

Policy, like the scripted model: if tools are offered and the last message is not a tool
result, call the first tool with the JSON object in the last user message; otherwise
answer with the last tool result. Embeddings: each input's vector is drawn from its
SHA-256 (``dimensions`` of them, 8 by default), one token per word. Every request is
recorded, so tests can count calls; ``GET /stats`` says how many were received and how
many it holds now and held at most at once.

Run standalone: ``python -m tests.openai_server PORT [DELAY_S] [LOG]`` (``--help``: a
random delay per request, a log of arrivals with their times).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class _Server(ThreadingHTTPServer):
    """Quiet about clients that went away mid-answer: the crash tests kill workers whose
    calls are in flight, and each such call printed a BrokenPipeError traceback."""

    # Slow answers pile up connections (a worker holds hundreds of calls at once): the
    # default backlog of 5 would make them wait to connect, not for the answer.
    request_queue_size = 4096

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def vector_of(text: str, dimensions: int = 8) -> list[float]:
    """The vector the server gives ``text``: from its SHA-256, in [-1, 1)."""
    raw = hashlib.sha256(text.encode()).digest()
    return [round(raw[i % 32] / 128 - 1, 6) for i in range(dimensions)]


def embeddings_reply(body: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI ``/v1/embeddings`` answer for ``body``."""
    texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
    dims = int(body.get("dimensions") or 8)
    tokens = sum(len(str(t).split()) for t in texts)
    return {"object": "list", "model": body.get("model", "test"),
            "data": [{"object": "embedding", "index": i, "embedding": vector_of(str(t), dims)}
                     for i, t in enumerate(texts)],
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}


class OpenAIServer:
    """Serves POST /v1/chat/completions on 127.0.0.1 in a background thread."""

    def __init__(self, port: int = 0, delay: float = 0.0, log_path: str | None = None, *,
                 responder: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
                 context_chars: int | None = None, delay_range: tuple[float, float] | None = None,
                 seed: int | None = None, arrivals_path: str | None = None,
                 caller_header: str | None = None, token_delay: float = 0.0) -> None:
        self.requests: list[dict[str, Any]] = []
        self.delay = delay
        # Each request waits a time drawn from this range instead (from ``seed``: a run's
        # delays are the same draws, in the order the requests came), as a provider whose
        # answers take longer or shorter does.
        self.delay_range = delay_range
        self._rng = random.Random(seed)
        # Each request's arrival time, caller (its ``caller_header``: a chaos round's workers
        # name their process in one) and messages, one JSON line each: what a check reads to
        # tell when a request was asked and by which process (``log_path`` keeps the
        # messages alone).
        self.arrivals_path = arrivals_path
        self.caller_header = caller_header
        # The assistant message of a request body, instead of the default policy.
        self.responder = responder
        # A request whose messages' contents are longer than this is refused as a
        # provider refuses one over its context window (HTTP 400).
        self.context_chars = context_chars
        # Statuses (and headers, and message) the next requests get instead of an answer.
        self.failures: list[tuple[int, dict[str, str], str | None]] = []
        # The Authorization header of each request, as sent.
        self.authorizations: list[str | None] = []
        self.log_path = log_path
        # A streamed answer's chunks go this many seconds apart (a model writing tokens).
        self.token_delay = token_delay
        # Each streamed text chunk: (answer id, its text, time.time() when it was written).
        self.sent: list[tuple[str, str, float]] = []
        self._lock = threading.Lock()
        # Requests being answered now, and the most at once (what a slow provider holds).
        self.in_flight = 0
        self.peak = 0
        # When each request came (time.monotonic()), in order.
        self.arrived: list[float] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                if self.path.rstrip("/") != "/stats":
                    self.send_error(404)
                    return
                data = json.dumps(server.stats()).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                server.holding(+1)
                try:
                    self._answer()
                finally:
                    server.holding(-1)

            def _answer(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.record(body, self.headers.get(server.caller_header) if server.caller_header else None)
                server.authorizations.append(self.headers.get("Authorization"))
                delay = server.next_delay()
                if delay:
                    time.sleep(delay)
                failure = server.next_failure()
                too_long = failure is None and "messages" in body and server.too_long(body)
                if too_long:
                    failure = (400, {}, "This model's maximum context length is exceeded: "
                                        "context_length_exceeded")
                if failure is not None:
                    status, headers, message = failure
                    # A provider that quotes the key it was sent, as some do in a 401.
                    text = (message or f"test failure {status}").replace(
                        "{authorization}", self.headers.get("Authorization") or "")
                    data = json.dumps({"error": {"message": text,
                                                 "type": "test", "code": status}}).encode()
                    self.send_response(status)
                    for name, value in headers.items():
                        self.send_header(name, value)
                elif self.path.endswith("/embeddings"):
                    data = json.dumps(embeddings_reply(body)).encode()
                    self.send_response(200)
                elif body.get("stream"):
                    self._stream(server.reply(body), body)
                    return
                else:
                    data = json.dumps(server.reply(body)).encode()
                    self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, reply: dict[str, Any], body: dict[str, Any]) -> None:
                """``reply`` as server-sent events, a chunk per token ``token_delay`` apart
                (each chunk's send time kept in ``sent``)."""
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.end_headers()
                usage = (body.get("stream_options") or {}).get("include_usage")
                for n, chunk in enumerate(stream_chunks(reply, include_usage=bool(usage))):
                    if n and server.token_delay:
                        time.sleep(server.token_delay)
                    self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                    self.wfile.flush()
                    server.sent_chunk(reply["id"], chunk)
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()

        self.httpd = _Server(("127.0.0.1", port), Handler)
        self.port = self.httpd.server_address[1]
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        """The ``api_base`` for litellm."""
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> OpenAIServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def fail(self, status: int, times: int = 1, headers: dict[str, str] | None = None,
             message: str | None = None) -> None:
        """Answer the next ``times`` requests with ``status`` (and ``headers``; ``message``
        as the error's, ``{authorization}`` in it replaced by the request's header)."""
        with self._lock:
            self.failures += [(status, headers or {}, message)] * times

    def next_failure(self) -> tuple[int, dict[str, str], str | None] | None:
        with self._lock:
            return self.failures.pop(0) if self.failures else None

    def next_delay(self) -> float:
        """How long the request now arriving waits before its answer."""
        if self.delay_range is None:
            return self.delay
        with self._lock:
            return self._rng.uniform(*self.delay_range)

    def stats(self) -> dict[str, int]:
        """Requests received, held now, and held at most at once."""
        with self._lock:
            return {"requests": len(self.requests), "in_flight": self.in_flight, "peak": self.peak}

    def holding(self, change: int) -> None:
        """One more request being answered (+1), or one fewer (-1)."""
        with self._lock:
            self.in_flight += change
            self.peak = max(self.peak, self.in_flight)

    def record(self, body: dict[str, Any], caller: str | None = None) -> None:
        arrived = time.time()
        with self._lock:
            self.requests.append(body)
            self.arrived.append(time.monotonic())
            if self.log_path and "messages" in body:
                with open(self.log_path, "a") as fh:
                    fh.write(json.dumps(body["messages"], sort_keys=True) + "\n")
            if self.arrivals_path and "messages" in body:
                with open(self.arrivals_path, "a") as fh:
                    fh.write(json.dumps({"t": round(arrived, 4), "caller": caller,
                                         "messages": body["messages"]}) + "\n")

    def sent_chunk(self, answer: str, chunk: dict[str, Any]) -> None:
        """Note that a streamed chunk was written (its text, if it has some)."""
        choices = chunk.get("choices") or [{}]
        text = (choices[0].get("delta") or {}).get("content")
        if text:
            with self._lock:
                self.sent.append((answer, text, time.time()))

    def too_long(self, body: dict[str, Any]) -> bool:
        limit = self.context_chars
        return limit is not None and sum(len(m.get("content") or "") for m in body["messages"]) > limit

    def reply(self, body: dict[str, Any]) -> dict[str, Any]:
        if self.responder is not None:
            message = self.responder(body)
            return {
                "id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion",
                "created": int(time.time()), "model": body.get("model", "test"),
                "choices": [{"index": 0, "message": message,
                             "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            }
        messages = body["messages"]
        last = messages[-1]
        tools = body.get("tools") or []
        message: dict[str, Any]
        if tools and last["role"] != "tool":
            user = next(m for m in reversed(messages) if m["role"] == "user")
            try:
                args = json.loads(user["content"])
            except ValueError:
                args = {}
            message = {"role": "assistant", "content": None, "tool_calls": [{
                "id": f"call_{len(messages)}", "type": "function",
                "function": {"name": tools[0]["function"]["name"], "arguments": json.dumps(args)}}]}
            finish = "tool_calls"
        else:
            message = {"role": "assistant", "content": f"The result is {last['content']}."}
            finish = "stop"
        return {
            "id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion",
            "created": int(time.time()), "model": body.get("model", "test"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }


def stream_chunks(reply: dict[str, Any], include_usage: bool = False) -> list[dict[str, Any]]:
    """The ``chat.completion.chunk`` objects of a whole answer, as OpenAI streams it: the
    role, then the text a word at a time (each with the space before it), then each tool
    call (its id and name, then its arguments in pieces of 8 characters), then the finish
    reason (and the usage, if asked)."""
    message = reply["choices"][0]["message"]
    base = {"id": reply["id"], "object": "chat.completion.chunk", "created": reply["created"],
            "model": reply["model"]}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    out = [chunk({"role": "assistant", "content": ""})]
    text = message.get("content") or ""
    words = text.split(" ")
    out += [chunk({"content": w if i == 0 else " " + w}) for i, w in enumerate(words) if text]
    for i, call in enumerate(message.get("tool_calls") or []):
        out.append(chunk({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                          "function": {"name": call["function"]["name"],
                                                       "arguments": ""}}]}))
        args = call["function"]["arguments"]
        out += [chunk({"tool_calls": [{"index": i, "function": {"arguments": args[j:j + 8]}}]})
                for j in range(0, len(args), 8)]
    out.append(chunk({}, reply["choices"][0]["finish_reason"]))
    if include_usage:
        out.append({**base, "choices": [], "usage": reply["usage"]})
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m tests.openai_server")
    ap.add_argument("port", type=int, help="0: any free port (the address is printed)")
    ap.add_argument("delay", type=float, nargs="?", default=0.0, help="seconds per answer")
    ap.add_argument("log", nargs="?", default=None, help="each request's messages, a line each")
    ap.add_argument("--delay-range", type=float, nargs=2, metavar=("MIN", "MAX"),
                    help="each answer after a random time in this range instead")
    ap.add_argument("--seed", type=int, default=None, help="of the random delays")
    ap.add_argument("--arrivals", default=None,
                    help="each request's arrival time and messages, a JSON line each")
    ap.add_argument("--caller-header", default=None,
                    help="the request header whose value --arrivals writes as its caller")
    args = ap.parse_args(argv)
    srv = OpenAIServer(args.port, args.delay, args.log, seed=args.seed, arrivals_path=args.arrivals,
                       caller_header=args.caller_header,
                       delay_range=None if args.delay_range is None
                       else (args.delay_range[0], args.delay_range[1]))
    srv.start()
    print(srv.base_url, flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
