"""The ``eddies`` command.

``eddies demo`` runs the bundled calculator agent in-process on the offline model and
prints the outputs and one session's history.
"""

from __future__ import annotations

import argparse
import sys

from eddies import __version__


def demo() -> int:
    """Run the in-process demo; returns the exit code."""
    from eddies.connectors.local import LocalRunner
    from eddies.demo import PROMPTS, calculator_agent, describe

    runner = LocalRunner(calculator_agent())
    print("Eddies demo: calculator agent, offline scripted model, in-process runner\n")
    for session, prompt in PROMPTS:
        print(f"  -> {session}: {prompt}")
    outputs = runner.run(PROMPTS)
    print()
    for ev, value in zip(runner.outputs, outputs, strict=True):
        print(f"  <- {ev.session_id} (run {ev.run}): {value}")
    print("\nHistory of session 'alice' (every model and tool call is a durable call):")
    for ev in runner.history:
        if ev.session_id == "alice":
            print(describe(ev))
    calls = runner.executor.performed
    print(f"\n{len(runner.history)} events, {calls} durable calls performed, "
          f"{len(outputs)} outputs.")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``eddies`` console script."""
    parser = argparse.ArgumentParser(prog="eddies", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=f"eddies {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="run the bundled example agent end to end")
    args = parser.parse_args(argv)
    if args.command == "demo":
        return demo()
    parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
