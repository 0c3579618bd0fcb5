"""``eddies serve``: an HTTP front door over an app's topics (send inputs, follow a session
as Server-Sent Events, answer approvals and signals, read a session's history, and an
OpenAI-compatible ``/v1/chat/completions``), served by uvicorn. Needs the ``serve`` extra
(starlette, uvicorn). Example::

    eddies serve --app support --port 8000      # http://127.0.0.1:8000/v1/...
"""

from __future__ import annotations

import os
from typing import Annotated

import typer
from rich.markup import escape

from eddies.cli.errors import fail
from eddies.cli.listening import LOOPBACK, listen
from eddies.cli.options import AppOpt, BootstrapOpt, ConfigOpt
from eddies.cli.output import console
from eddies.cli.settings import kafka_settings, settings_or_exit

serve_app = typer.Typer()


@serve_app.command(short_help="Serve an HTTP door to the app, OpenAI-compatible chat too.")
def serve(
    port: Annotated[int, typer.Option(help="Port to serve on (0: any free one).")] = 8000,
    host: Annotated[str, typer.Option(
        help="Address to serve on. Another than this machine's own needs tokens "
             "(the serve_tokens_env setting).")] = "127.0.0.1",
    config: ConfigOpt = None,
    app_id: AppOpt = None,
    bootstrap_servers: BootstrapOpt = None,
    answer_timeout: Annotated[float, typer.Option(
        help="Seconds a request waits for its run's output.")] = 300.0,
) -> None:
    """Serve an HTTP door to the app until Ctrl-C. It keeps no state: start as many as you
    like behind a load balancer. Each one reads the app's stream and outputs, and writes
    inputs and signals; a worker of the app answers them."""
    try:
        import starlette  # noqa: F401  (imported by the app; checked here to say what to install)
        import uvicorn
    except ImportError as err:
        fail(f"eddies serve needs {err.name}: pip install 'eddies[serve]'")
    from eddies.connectors.gateway.app import create_gateway
    from eddies.connectors.gateway.tokens import Tokens
    from eddies.connectors.runtime.settings import ConfigError
    from eddies.connectors.runtime.topics import TopicNames

    settings = settings_or_exit(config, app=app_id, bootstrap_servers=bootstrap_servers)
    variable = settings.serve_tokens_env
    try:
        tokens = Tokens.parse(os.environ.get(variable, ""), where=f"{variable} (serve_tokens_env)")
    except ConfigError as err:
        fail(str(err))
    if not tokens and host not in LOOPBACK:
        fail(f"--host {host}: with no token in {variable} (serve_tokens_env), eddies serve "
             "listens on this machine only (127.0.0.1): set tokens to serve others")
    names = TopicNames(settings.app)
    with kafka_settings(settings, need=(names.input, names.output, names.stream)) as s:
        signer = None
        if tokens.identities:  # what a token proves is signed, for the workers to trust it
            from eddies.connectors.runtime.preflight import producer_identity_signer

            try:
                signer = producer_identity_signer(s)
            except ConfigError as err:
                fail(f"{err} ({variable} gives tokens a user)")
        door = create_gateway(s, tokens=tokens, answer_timeout_s=answer_timeout, signer=signer)
        try:
            sock = listen(host, port)
        except OSError as err:
            fail(f"cannot serve on {host}:{port}: {err.strerror or err}")
        shown = f"[{host}]" if ":" in host else host
        url = f"http://{shown}:{sock.getsockname()[1]}/v1"
        guard = (f"{len(tokens.prefixes)} token(s) from {variable}" if tokens
                 else "no token: this machine only")
        console.print(f"eddies serve for app {escape(s.app)} on {escape(s.bootstrap_servers)}: "
                      f"[bold]{escape(url)}[/bold] ({escape(guard)}; Ctrl-C stops it)", highlight=False)
        server = uvicorn.Server(uvicorn.Config(door, log_level="warning", access_log=False))
        server.run(sockets=[sock])
