"""``eddies ui``: a local web page over an app's topics (its sessions and their status;
one session's timeline, tree and payloads; replay, and fork where available; the reports
of its evaluations), served by uvicorn. Needs the ``ui`` extra (starlette, uvicorn). Example::

    eddies ui --app demo --agent eddies.demo:calculator_agent   # http://127.0.0.1:8321/
"""

from __future__ import annotations

import functools
from typing import Annotated, Any

import typer
from rich.markup import escape

from eddies.cli.agents import agent_plan, chosen
from eddies.cli.errors import fail
from eddies.cli.listening import listen
from eddies.cli.options import AppOpt, BootstrapOpt, ConfigOpt
from eddies.cli.output import console
from eddies.cli.settings import kafka_settings, settings_or_exit

ui_app = typer.Typer()


@ui_app.command(short_help="Serve a web view of the app's sessions and evaluations.")
def ui(
    port: Annotated[int, typer.Option(help="Port to serve on (0: any free one).")] = 8321,
    host: Annotated[str, typer.Option(
        help="Address to serve on; another than this machine's own lets others see every "
             "session's data.")] = "127.0.0.1",
    config: ConfigOpt = None,
    app_id: AppOpt = None,
    bootstrap_servers: BootstrapOpt = None,
    agent: Annotated[str | None, typer.Option(
        help="module:attribute (or FILE.yaml#name, FILE.sql#name) of the app's Agent, for "
             "replay; default: EDDIES_AGENT.")] = None,
) -> None:
    """Serve a web view of the app's sessions until Ctrl-C: the sessions with their status
    and a search by id; a session's timeline, tree and each event's payload; replay, fork,
    and answers to a session that waits (approve, reject, resume, send a signal); and under
    Evaluations, the reports eddies eval kept for the app."""
    from eddies.connectors.runtime.topics import TopicNames

    try:
        import starlette  # noqa: F401  (imported by the app; checked here to say what to install)
        import uvicorn
    except ImportError as err:
        fail(f"eddies ui needs {err.name}: pip install 'eddies[ui]'")
    from eddies.connectors.inspect.sessions import replay_view
    from eddies.connectors.inspect.web import LOCAL_HOSTS, create_app
    from eddies.connectors.runtime.client import send_signal

    settings = settings_or_exit(config, app=app_id, bootstrap_servers=bootstrap_servers, agent=agent)
    plan = agent_plan(settings, [])  # before the broker: a wrong --agent is said at once
    with kafka_settings(settings, need=(TopicNames(settings.app).events,)) as s:
        same_agent = not chosen(s, agent)  # the default agent: another's sessions are refused
        fork = _fork(s, plan, same_agent)
        # Served on a loopback address, only requests naming it are (a DNS-rebinding page
        # names its own host); on every address, the names it is reached by are unknown.
        wildcard = host in ("0.0.0.0", "::", "")
        hosts = None if wildcard else (*LOCAL_HOSTS, host)
        listing, page = _evaluations(s)
        hub = _stream_reader(s)
        web = create_app(s, replay=functools.partial(replay_view, s, plan, same_agent=same_agent), fork=fork,
                         signal=functools.partial(send_signal, s), allowed_hosts=hosts,
                         evaluations=listing, evaluation_page=page, hub=hub)
        try:
            sock = listen(host, port)
        except OSError as err:
            fail(f"cannot serve on {host}:{port}: {err.strerror or err}")
        shown = "127.0.0.1" if wildcard else (f"[{host}]" if ":" in host else host)
        url = f"http://{shown}:{sock.getsockname()[1]}/"
        console.print(f"eddies ui for app {escape(s.app)} on {escape(s.bootstrap_servers)}: "
                      f"[bold]{escape(url)}[/bold] (Ctrl-C stops it)", highlight=False)
        server = uvicorn.Server(uvicorn.Config(web, log_level="warning", access_log=False))
        try:
            server.run(sockets=[sock])
        finally:
            if hub is not None:
                hub.close()


def _stream_reader(settings: Any) -> Any:
    """The reader of the app's stream (a running session's answer as it is written), or
    None for an app without one (made by a worker before streaming was)."""
    from eddies.connectors.inspect.stream_hub import SessionHub

    try:
        return SessionHub(settings).start()
    except LookupError:
        return None


def _evaluations(settings: Any) -> tuple[Any, Any]:
    """The Evaluations tab's list and pages: the reports ``eddies eval`` kept in
    ``APP.evaluations``, each shown as its ``--html`` page is."""
    from eddies.connectors.evaluation.html import html_page
    from eddies.connectors.evaluation.saved import saved_reports

    def listing() -> list[dict[str, Any]]:
        return [saved.listing() for saved in saved_reports(settings)]

    def page(evaluation_id: str) -> str | None:
        found = next((r for r in saved_reports(settings) if r.id == evaluation_id), None)
        return None if found is None else html_page(found.report, found.title)

    return listing, page


def _fork(settings: Any, plan: Any, same_agent: bool) -> Any:
    """``fork(session_id, at_seq, new_session)`` for the web view: ``eddies fork``'s
    :func:`~eddies.connectors.local.rerun.fork_session` on this app and agent (its steps
    up to the one given taken over, no call made again, the rest made live)."""
    from eddies.connectors.local.rerun import fork_session

    def fork(session_id: str, at_seq: int, new_session: str) -> dict[str, Any]:
        report = fork_session(settings, plan, session_id, at_seq, new_session, same_agent=same_agent)
        return {"session": new_session, "inputs": report.inputs, "events": report.events,
                "reused": len(report.reused), "live": len(report.live),
                "outputs": len(report.outputs)}

    return fork
