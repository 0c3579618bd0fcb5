"""Telling a dead claimant from a slow one: is the process that started a call still a
member of its app's groups?

Every role's group consumer carries its process in its ``client.id``
(``eddies|SLOT|INCARNATION``, :func:`client_id`). The group coordinator keeps a member
while its heartbeats come (librdkafka sends them from a thread of its own, so a call that
runs for an hour does not stop them) and drops it a session timeout after they stop: after
a kill -9, a pause past the timeout or a network cut. So a claimant missing from both the
orchestrator and the executor group, in two looks a second or more apart, is taken for
dead: its call is decided (UNKNOWN, which runs a reconciler or an idempotent call again)
within seconds, not after ``outcome_wait_ms``. If it was only cut off or paused, what it
journals later comes after that decision and is refused (the first outcome decides).

The members come from the admin API on Apache Kafka, and on the embedded broker from a
DescribeGroups v0 request written here (its admin API answers with no members: the
ConsumerGroupDescribe it is asked first comes back empty, and librdkafka does not fall back).
Example::

    members = GroupMembers(settings, membership)
    alive = members.claimants()          # {Claimant(...), ...}, or None if nobody answers
"""

from __future__ import annotations

import logging
import socket
import struct
import time
from typing import Any

from eddies.connectors.journal.claims import Claimant
from eddies.connectors.runtime.membership import Membership
from eddies.connectors.runtime.settings import Settings

log = logging.getLogger("eddies.worker")

_PREFIX = "eddies|"
#: A member id is its client id, a dash and a UUID (36 characters).
_UUID_TAIL = 37


def client_id(claimant: Claimant) -> str:
    """The ``client.id`` of a role's group consumer in process ``claimant``."""
    return _PREFIX + claimant.token.decode()


def claimant_of(member_client_id: str, member_id: str = "") -> Claimant | None:
    """The process a group member is, from its client id (or, where the broker leaves that
    empty, the member id it derived from it); None for a member that is no worker."""
    name = member_client_id or member_id[:-_UUID_TAIL]
    if not name.startswith(_PREFIX):
        return None
    claimant = Claimant.parse(name[len(_PREFIX):].encode())
    return claimant if claimant.slot else None


def describe_groups_request(groups: list[str], correlation: int = 1) -> bytes:
    """A DescribeGroups v0 request, framed (size first)."""
    def string(text: str) -> bytes:
        raw = text.encode()
        return struct.pack(">h", len(raw)) + raw

    body = struct.pack(">hhi", 15, 0, correlation) + string("eddies-liveness")
    body += struct.pack(">i", len(groups)) + b"".join(string(g) for g in groups)
    return struct.pack(">i", len(body)) + body


def parse_describe_groups(data: bytes) -> dict[str, list[tuple[str, str]]]:
    """(member id, client id) of each group's members, from a DescribeGroups v0 response
    (without its size). ValueError if it cannot be read."""
    pos = 4  # the correlation id

    def take(fmt: str) -> Any:
        nonlocal pos
        size = struct.calcsize(fmt)
        if pos + size > len(data):
            raise ValueError("DescribeGroups response cut short")
        (value,) = struct.unpack_from(fmt, data, pos)
        pos += size
        return value

    def string() -> str:
        nonlocal pos
        n = take(">h")
        if n < 0:
            return ""
        text = data[pos:pos + n].decode(errors="replace")
        pos += n
        return text

    def blob() -> None:
        nonlocal pos
        n = take(">i")
        pos += max(n, 0)

    out: dict[str, list[tuple[str, str]]] = {}
    for _ in range(take(">i")):
        error = take(">h")
        group = string()
        string()  # state
        string()  # protocol type
        string()  # protocol
        members = []
        for _ in range(take(">i")):
            member, client = string(), string()
            string()  # client host
            blob()  # metadata
            blob()  # assignment
            members.append((member, client))
        if error == 0:
            out[group] = members
    return out


class GroupMembers:
    """The processes that are members of an app's orchestrator and executor groups now."""

    def __init__(self, settings: Settings, membership: Membership, timeout_s: float = 2.0) -> None:
        self.settings = settings
        self.membership = membership
        self.groups = [f"{settings.app}.orchestrator", f"{settings.app}.executor"]
        self.timeout_s = timeout_s
        self._admin: Any = None

    def claimants(self) -> set[Claimant] | None:
        """The live members' processes; None when the coordinator does not answer."""
        try:
            members = self._embedded() if self.membership.embedded else self._admin_api()
        except Exception as err:  # out of reach: nobody is declared dead meanwhile
            log.debug("group members could not be listed: %s", err)
            return None
        out = set()
        for member, client in members:
            claimant = claimant_of(client, member)
            if claimant is not None:
                out.add(claimant)
        return out

    def _embedded(self) -> list[tuple[str, str]]:
        host, _, port = self.settings.bootstrap_servers.split(",")[0].rpartition(":")
        with socket.create_connection((host, int(port)), timeout=self.timeout_s) as sock:
            sock.settimeout(self.timeout_s)
            sock.sendall(describe_groups_request(self.groups))
            size = struct.unpack(">i", _read(sock, 4))[0]
            groups = parse_describe_groups(_read(sock, size))
        return [m for g in self.groups for m in groups.get(g, [])]

    def _admin_api(self) -> list[tuple[str, str]]:
        from confluent_kafka.admin import AdminClient

        if self._admin is None:
            self._admin = AdminClient(self.settings.client_config())
        futures = self._admin.describe_consumer_groups(self.groups,
                                                       request_timeout=self.timeout_s)
        out = []
        for future in futures.values():
            description = future.result(timeout=self.timeout_s)
            out += [(m.member_id, m.client_id) for m in description.members]
        return out


def _read(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        data += chunk
    return data


class Liveness:
    """Which claimants are dead: missing from every group in two looks at least
    ``min_gap_s`` apart (a member in the middle of a rejoin is not taken for dead).
    ``members``: None when the broker cannot be asked (nobody is declared dead early)."""

    def __init__(self, members: GroupMembers | None, min_gap_s: float = 1.0) -> None:
        self.members = members
        self.min_gap_s = min_gap_s
        self._missing_since: dict[Claimant, float] = {}
        self._dead: set[Claimant] = set()
        self._last_look = 0.0

    def dead(self, claimant: Claimant) -> bool:
        """Whether ``claimant`` was found dead by the latest looks."""
        return claimant in self._dead

    def look(self, watched: set[Claimant], now: float | None = None) -> set[Claimant]:
        """Look at the groups (at most once per ``min_gap_s``) for the ``watched``
        claimants; returns those now known dead."""
        now = time.monotonic() if now is None else now
        if self.members is None or not watched or now - self._last_look < self.min_gap_s:
            return self._dead & watched
        self._last_look = now
        alive = self.members.claimants()
        if alive is None:
            return self._dead & watched
        for claimant in watched:
            if claimant in alive:  # a member again (it was only paused or cut off)
                self._missing_since.pop(claimant, None)
                self._dead.discard(claimant)
                continue
            if claimant in self._dead:
                continue
            since = self._missing_since.setdefault(claimant, now)
            if now - since >= self.min_gap_s:
                self._dead.add(claimant)
                self._missing_since.pop(claimant, None)
        for claimant in list(self._missing_since):  # forget what nobody waits for
            if claimant not in watched:
                del self._missing_since[claimant]
        self._dead &= watched
        return set(self._dead)
