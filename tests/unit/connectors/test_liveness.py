"""Telling a dead claimant from a slow one by its app's group members (liveness.py)."""

from __future__ import annotations

import struct

from eddies.connectors.journal.claims import Claimant
from eddies.connectors.kafka.liveness import (
    GroupMembers,
    Liveness,
    claimant_of,
    client_id,
    describe_groups_request,
    parse_describe_groups,
)

ME = Claimant("host-12", "9f2c0a")


def _s(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def _response(groups: list[tuple[int, str, list[tuple[str, str]]]]) -> bytes:
    out = struct.pack(">ii", 7, len(groups))
    for error, name, members in groups:
        out += struct.pack(">h", error) + _s(name) + _s("Stable") + _s("consumer") + _s("range")
        out += struct.pack(">i", len(members))
        for member, client in members:
            out += _s(member) + _s(client) + _s("/127.0.0.1")
            out += struct.pack(">i", 3) + b"abc" + struct.pack(">i", -1)
    return out


def test_a_members_process_is_read_from_its_client_id_or_member_id() -> None:
    cid = client_id(ME)
    assert claimant_of(cid) == ME
    # The embedded broker leaves the client id empty and names the member after it.
    assert claimant_of("", f"{cid}-116215b6-8ba1-4d4b-a110-653a5c6eb24f") == ME
    assert claimant_of("rdkafka", "rdkafka-116215b6-8ba1-4d4b-a110-653a5c6eb24f") is None


def test_a_describe_groups_response_is_read() -> None:
    data = _response([(0, "app.orchestrator", [("m-1", client_id(ME)), ("m-2", "")]),
                      (16, "app.executor", [])])
    assert parse_describe_groups(data) == {"app.orchestrator": [("m-1", client_id(ME)), ("m-2", "")]}
    request = describe_groups_request(["app.orchestrator"])
    assert struct.unpack_from(">ihh", request) == (len(request) - 4, 15, 0)


class _Members:
    def __init__(self) -> None:
        self.alive: set[Claimant] | None = {ME}

    def claimants(self) -> set[Claimant] | None:
        return self.alive


def test_a_claimant_is_dead_once_missing_in_two_looks_a_gap_apart() -> None:
    members = _Members()
    liveness = Liveness(members, min_gap_s=1.0)  # type: ignore[arg-type]
    assert liveness.look({ME}, now=10.0) == set()
    members.alive = set()
    assert liveness.look({ME}, now=11.0) == set()  # missing once
    assert liveness.look({ME}, now=11.5) == set()  # too soon to look again
    assert liveness.look({ME}, now=12.0) == {ME} and liveness.dead(ME)


def test_nobody_is_declared_dead_while_the_broker_cannot_be_asked() -> None:
    members = _Members()
    members.alive = None
    liveness = Liveness(members, min_gap_s=1.0)  # type: ignore[arg-type]
    for t in range(10):
        assert liveness.look({ME}, now=float(t)) == set()
    assert Liveness(None).look({ME}, now=5.0) == set()


def test_a_claimant_back_in_its_group_is_alive_again() -> None:
    """Paused past its session timeout, it was taken for dead; it rejoined: its later
    calls are waited for, not declared unknown."""
    members = _Members()
    liveness = Liveness(members, min_gap_s=1.0)  # type: ignore[arg-type]
    members.alive = set()
    liveness.look({ME}, now=1.0)
    assert liveness.look({ME}, now=2.0) == {ME}
    members.alive = {ME}
    assert liveness.look({ME}, now=3.0) == set() and not liveness.dead(ME)


def test_an_unreachable_broker_is_no_answer() -> None:
    from eddies.connectors.runtime.membership import Membership
    from eddies.connectors.runtime.settings import load_settings

    settings = load_settings(env={}, overrides={"bootstrap_servers": "127.0.0.1:9"})
    members = GroupMembers(settings, Membership(False, 1500, 200, embedded=True), timeout_s=0.5)
    assert members.claimants() is None
