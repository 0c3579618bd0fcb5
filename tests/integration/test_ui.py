"""``eddies ui`` in headless Chromium (Debian's chromium, driven by Playwright with its
executable path), looked at as a person would: the sessions list and their statuses, a
search by id, answers to the sessions that wait (a signal sent, a tool call approved),
one session's timeline, tree and payloads, and a replay that recomputes every id.
``UI_SCREENSHOT=docs/ui.png`` keeps the session view's screenshot there (shown in
docs/operations/replay-and-fork.md)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import queue
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from eddies.connectors.runtime.settings import Settings

pytestmark = pytest.mark.integration

CHROMIUM = Path("/usr/bin/chromium")
# Without the background-networking flags Chromium's own connections (updates, sync,
# field trials) are refused on a closed network, and it stalls on them.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
AGENT = "tests.agents:shop_agent"
ALICE = "team/alice #1"  # "/", " " and "#": the id travels percent-encoded


def _skip_reason() -> str | None:
    if not os.access(CHROMIUM, os.X_OK):
        return f"Debian's chromium is not installed ({CHROMIUM}; make test installs it)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (the dev extra has it)"
    return None


def _statuses(settings: Settings) -> dict[str, str]:
    from eddies.connectors.inspect.sessions import SessionIndex

    return {s.session_id: s.status for s in SessionIndex(settings).refresh().search()}


def _signals(settings: Settings, session: str) -> list[tuple[str, Any]]:
    """The signals ``session`` got, as (name, value), from ``APP.events``."""
    from eddies.connectors.runtime.client import read_events
    from eddies.connectors.runtime.topics import TopicNames
    from eddies.events import SignalEvent

    return [(p.name, p.value) for e in read_events(settings, TopicNames(settings.app).events)
            if e.session_id == session and isinstance(p := e.payload, SignalEvent)]


@contextlib.contextmanager
def serve_ui(settings: Settings, agent: str = AGENT) -> Iterator[str]:
    """``eddies ui --port 0`` on the test's app, as a user starts it; its URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "eddies", "ui", "--port", "0", "--app", settings.app,
         "--bootstrap-servers", settings.bootstrap_servers, "--agent", agent],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=Path(__file__).parents[2],
        env=dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True", LITELLM_OFFLINE_MODE="true",
                 PYTHONUNBUFFERED="1"))
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout or ()], daemon=True).start()
    seen: list[str] = []
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None or not lines.empty(), f"eddies ui exited: {''.join(seen)}"
            assert time.monotonic() < deadline, f"eddies ui printed no URL: {''.join(seen)}"
            try:
                seen.append(lines.get(timeout=0.5))
            except queue.Empty:
                continue
            if found := re.search(r"http://\S+/", seen[-1]):
                break
        yield found.group(0)
    finally:
        proc.terminate()
        proc.wait(20)


@contextlib.contextmanager
def browser_page(tmp_path: Path) -> Iterator[Any]:
    """A page of headless Chromium, on a profile of its own."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        # A fresh profile: nothing from an earlier run (or a person's browser) is reused.
        context = pw.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=str(CHROMIUM), headless=True,
            args=CHROMIUM_ARGS, viewport={"width": 1500, "height": 940})
        try:
            yield context.new_page()
        finally:
            context.close()


def test_a_person_finds_a_session_reads_its_timeline_and_tree_and_replays_it(
        settings: Settings, tmp_path: Path) -> None:
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    from playwright.sync_api import expect

    from eddies.connectors.runtime.client import producer, read_events, send_input
    from eddies.connectors.runtime.topics import TopicNames
    from eddies.engine import approval
    from eddies.events import ApprovalRequestEvent
    from tests.integration.workers import start_worker, stop_worker, wait_until

    started = time.monotonic()
    settings = dataclasses.replace(settings, app="shop-" + settings.app[1:])  # in the picture
    log = tmp_path / "worker.log"
    worker = start_worker(settings, AGENT, log)  # its topics made: the command needs them
    ui = contextlib.ExitStack()
    try:
        url = ui.enter_context(serve_ui(settings))
        prod = producer(settings)
        send_input(settings, ALICE, "look up and refund o-1", prod=prod)  # a refund to approve
        send_input(settings, "bob", {"signal": "go", "timeout_s": 600}, prod=prod)
        send_input(settings, "carol", {"sleep_s": 0.01}, prod=prod)
        prod.flush(30)
        wait_until("each session where it waits", lambda: _statuses(settings) == {
            ALICE: "waiting for approval", "bob": "waiting for a signal", "carol": "answered"},
            worker, log, timeout=90)
        with browser_page(tmp_path) as page:
            page.goto(url)
            expect(page.locator("#app-name")).to_have_text(f"app {settings.app}")
            rows = page.locator("#sessions tbody tr")
            expect(rows).to_have_count(3)
            for sid, status in [(ALICE, "waiting for approval"), ("bob", "waiting for a signal"),
                                ("carol", "answered")]:
                expect(rows.filter(has_text=sid).locator(".badge")).to_have_text(status)

            # bob waits for a signal: a person sends it from bob's panel, with a value.
            rows.filter(has_text="bob").click()
            expect(page.locator("#session-title")).to_have_text("bob")
            waits = page.locator("#waits .wait")
            expect(waits).to_have_count(1)
            expect(waits).to_contain_text("Waits for signal")
            expect(waits.locator(".sid")).to_have_text("go")
            waits.locator("input.value").fill('{"by": "ui"}')
            waits.locator("button.send").click()
            expect(page.locator("#notice")).to_contain_text("Sent go of bob")
            wait_until("bob's answer", lambda: _statuses(settings).get("bob") == "answered",
                       worker, log, timeout=60)
            expect(rows.filter(has_text="bob").locator(".badge")).to_have_text("answered", timeout=15_000)
            expect(page.locator("#waits")).to_be_hidden(timeout=15_000)  # the view followed
            assert _signals(settings, "bob") == [("go", {"by": "ui"})]  # what eddies signal sends

            # The refund waits for approval: a person approves it there, with a reason; the
            # list shows the session answered.
            [ask] = [e.payload for e in read_events(settings, TopicNames(settings.app).output)
                     if isinstance(e.payload, ApprovalRequestEvent)]
            rows.filter(has_text=ALICE).click()
            expect(page.locator("#session-title")).to_have_text(ALICE)
            expect(waits).to_have_count(1)
            expect(waits).to_contain_text("Waits for approval")
            expect(waits.locator(".sid")).to_have_text(ask.signal)
            waits.locator("input.reason").fill("ticket 7")
            waits.locator("button.approve").click()
            expect(page.locator("#notice")).to_contain_text(f"Approved {ask.signal} of {ALICE}")
            wait_until("the refund's answer", lambda: _statuses(settings).get(ALICE) == "answered",
                       worker, log, timeout=60)
            assert _signals(settings, ALICE) == [(ask.signal, approval.answer(True, "ticket 7"))]
            page.fill("#search", "ALICE")  # any case
            expect(rows).to_have_count(1)
            expect(rows.first.locator(".sid")).to_have_text(ALICE)
            expect(rows.first.locator(".badge")).to_have_text("answered")

            rows.first.click()
            expect(page.locator("#session-title")).to_have_text(ALICE)
            # (A reader may not be shown a partition's newest records at once, on the
            # embedded broker: the page reads the session again when the list has more.)
            expect(page.locator("#session-status")).to_have_text("answered", timeout=15_000)
            timeline = page.locator("#timeline tbody tr")
            expect(timeline.last).to_contain_text("OutputEvent", timeout=15_000)
            expect(timeline.first).to_contain_text("InputEvent")
            expect(timeline.first).to_contain_text('"look up and refund o-1"')
            for text in ("CHAT_MODEL llm", 'TOOL lookup(order="o-1")',
                         'TOOL refund(order="o-1", amount=5)', "ApprovalRequestEvent", "SignalEvent"):
                expect(timeline.filter(has_text=text).first).to_be_visible()
            expect(timeline.last).to_contain_text("OutputEvent")
            expect(timeline.last).to_contain_text(r'"\"o-1: paid\" | \"refunded 5 on o-1\""')

            tree = page.locator("#tree")
            expect(tree.locator('.node[data-kind="run"]')).to_contain_text("look up and refund o-1")
            model = tree.locator('.node[data-kind="model"]').first
            expect(model).to_contain_text("llm")
            expect(model.locator(".metrics")).to_contain_text(re.compile(r"\d+ ms · \d+\+\d+ tokens"))
            expect(tree.locator('.node[data-kind="tool"]').filter(has_text="refund")).to_contain_text(
                "refunded 5 on o-1")
            expect(tree.locator('.node[data-kind="output"]')).to_contain_text("o-1: paid")

            # An event's payload: the lookup call, its arguments decoded.
            timeline.filter(has_text='TOOL lookup(order="o-1")').first.click()
            payload = page.locator("#payload")
            expect(payload).to_contain_text('"target": "lookup"')
            expect(payload).to_contain_text('"order": "o-1"')
            expect(page.locator("#payload-title")).to_contain_text("DurableCallRequest")

            page.click("#replay-button")
            expect(page.locator("#notice")).to_contain_text("every id recomputed identically")
            count = timeline.count()
            expect(page.locator("#timeline td.check.same")).to_have_count(count)

            # From a step: that event's "Replay from here" replays and marks only the steps
            # from there on.
            signal_row = timeline.filter(has_text="SignalEvent").first
            seq = int(signal_row.get_attribute("data-seq") or 0)
            assert seq > 1
            signal_row.click()
            page.click("#replay-from-button")
            expect(page.locator("#notice")).to_contain_text(f"Replay of {ALICE} from step #{seq}")
            expect(page.locator("#notice")).to_contain_text("every id recomputed identically")
            later = timeline.evaluate_all(f"rows => rows.filter(r => Number(r.dataset.seq) >= {seq}).length")
            assert 0 < later < count
            expect(page.locator("#timeline td.check.same")).to_have_count(later)
            expect(signal_row.locator("td.check")).to_have_class(re.compile("same"))
            expect(timeline.first.locator("td.check")).to_have_text("")  # before the step: not replayed
            page.fill("#search", "")  # for the picture: every session, the model call's payload
            expect(rows).to_have_count(3)
            timeline.nth(2).click()
            shot = tmp_path / "ui.png"
            page.screenshot(path=str(shot))
            if target := os.environ.get("UI_SCREENSHOT"):
                Path(target).write_bytes(shot.read_bytes())

            # Fork it after its last step: the whole history taken over, its
            # calls answered from the record and the approval (a signal named for a call of
            # the first session) applied to the fork's own call; it answers as the first did.
            page.click("#fork-button")  # after the selected step by default
            expect(page.locator("#fork-dialog")).to_be_visible()
            expect(page.locator("#fork-step option:checked")).to_have_attribute(
                "value", timeline.nth(2).get_attribute("data-seq") or "")
            page.click("#fork-cancel")
            timeline.last.click()
            page.click("#fork-button")
            expect(page.locator("#fork-step option:checked")).to_contain_text("OutputEvent")
            page.fill("#fork-id", "team/alice #1 (fork)")
            page.click("#fork-submit")
            expect(page.locator("#notice")).to_contain_text(re.compile(
                r"as team/alice #1 \(fork\) \([1-9]\d* calls answered from the record, 0 made live\)"),
                timeout=30_000)
            page.click("#fork-link")
            expect(page.locator("#session-title")).to_have_text("team/alice #1 (fork)")
            expect(page.locator("#session-status")).to_have_text("answered", timeout=15_000)
            expect(timeline.first).to_contain_text('"look up and refund o-1"')
            expect(timeline.filter(has_text="ApprovalRequestEvent")).to_have_count(1, timeout=15_000)
    finally:
        ui.close()
        stop_worker(worker)
    print(f"web view test: {time.monotonic() - started:.1f} s")

