"""``eddies send --follow`` ends at the output of the input it sent, not at an earlier
input's, whose run may still be going when it is sent."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

from eddies.cli.follow import follow
from eddies.events import AgentEvent, OutputEvent


class Feed:
    def __init__(self, records: list[Any]) -> None:
        self._records = records

    def records(self, idle_s: float) -> Iterator[Any]:
        yield from self._records


def _output(run: int, text: str, input_id: str | None) -> AgentEvent:
    return dataclasses.replace(AgentEvent.external(
        "s1", OutputEvent(output=text, input_id=input_id), event_id=f"o{run}", timestamp=run), run=run)


def test_follow_waits_for_the_output_of_its_own_input(capsys: pytest.CaptureFixture[str]) -> None:
    feed = Feed([_output(1, "first answer", "in/0/1"), _output(2, "second answer", "in/0/2")])
    assert follow(feed, "app", 1.0, "in/0/2")
    out = capsys.readouterr().out.splitlines()
    assert out == ["(an earlier input's answer) s1 run 1: first answer", "s1 run 2: second answer"]


def test_follow_takes_the_first_output_that_names_no_input(capsys: pytest.CaptureFixture[str]) -> None:
    # A worker from before outputs named their input, or an input whose id is unknown.
    assert follow(Feed([_output(1, "an answer", None)]), "app", 1.0, "in/0/2")
    assert follow(Feed([_output(1, "an answer", "in/0/1")]), "app", 1.0, "")
    assert not follow(Feed([_output(1, "not mine", "in/0/1")]), "app", 1.0, "in/0/2")


def test_send_names_a_tenant_only_with_its_user() -> None:
    from typer.testing import CliRunner

    from eddies.cli import app

    done = CliRunner().invoke(app, ["send", "s1", "hi", "--tenant", "acme"])
    assert done.exit_code == 2 and "--tenant needs --user" in done.output
