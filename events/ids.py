"""Deterministic identifiers: the same history always produces the same ids.

Event ids are content-derived (session, sequence number, type and cause), so a replay
that diverges from the recorded history shows up as different ids. Call ids are
readable, because people debug with them::

    >>> call_id("s1", (), 2, 1, 0)
    's1:r2:i1:c0'
    >>> call_id("s1", ("critic",), 2, 1, 0)
    's1/critic:r2:i1:c0'
"""

import re
from hashlib import blake2b

# Empty hashers of each digest size, copied per id: a copy and an update cost a quarter
# less than a new hasher (whose keyword arguments are parsed every time).
_B12 = blake2b(digest_size=12)
_B8 = blake2b(digest_size=8)


def event_id(session_id: str, seq: int, type_name: str, causation_id: str | None) -> str:
    """Id of the event accepted or emitted at ``seq`` in ``session_id``."""
    h = _B12.copy()
    h.update(f"{session_id}\x1f{seq}\x1f{type_name}\x1f{causation_id or ''}".encode())
    return h.hexdigest()


def scope_path(session_id: str, scope: tuple[str, ...]) -> str:
    """``session`` or ``session/child/grandchild`` for a sub-agent scope."""
    return "/".join((session_id, *scope)) if scope else session_id


def call_id(session_id: str, scope: tuple[str, ...], run: int, invocation: int, ordinal: int) -> str:
    """Id of the ``ordinal``-th durable call of action invocation ``invocation`` in ``run``."""
    if scope:
        return f"{scope_path(session_id, scope)}:r{run}:i{invocation}:c{ordinal}"
    return f"{session_id}:r{run}:i{invocation}:c{ordinal}"


#: One sub-agent scope part at the end of a call id's path: ``/name@i<n>c<n>`` (the
#: engine's scope_part; a sub-agent's name holds no ``/`` or ``@``).
_SCOPE_PART = re.compile(r"/[^/@]+@i\d+c\d+\Z")


def session_of_call(call_id: str) -> str:
    """The session id part of a call id (``session[/scope]:rN:iN:cN``; a session id may
    hold ``/`` itself: only sub-agent scope parts are taken off)::

        >>> session_of_call("team/a:r1:i2:c0"), session_of_call("s1/critic@i1c0:r2:i1:c0")
        ('team/a', 's1')
    """
    head = call_id.rsplit(":", 3)[0]
    while (part := _SCOPE_PART.search(head)) is not None:
        head = head[:part.start()]
    return head


def scope_of_call(call_id: str, session_id: str) -> tuple[str, ...]:
    """The sub-agent scope part of the id of a call of session ``session_id`` (``()`` for
    the agent's own calls; a session id may hold ``/`` itself)."""
    n = len(session_id)
    if call_id[n:n + 1] != "/":  # the agent's own call: the common case, at one look
        return ()
    return tuple(call_id.rsplit(":", 3)[0][n + 1:].split("/"))


def run_of_call(call_id: str) -> int:
    """The run number part of a call id (``session[/scope]:rN:iN:cN``)."""
    return int(call_id.rsplit(":", 3)[1][1:])


def result_event_id(call: str, attempt: int) -> str:
    """Id of an executor's answer to a call: the same for every executor that answers."""
    h = _B12.copy()
    h.update(f"{call}\x1f{attempt}\x1fresult".encode())
    return h.hexdigest()


def call_digest(kind: str, target: str, args: str) -> str:
    """What identifies a durable call's content; results echo it so replay can check it."""
    return digest(f"{kind}\x1f{target}\x1f{args}")


def digest(text: str) -> str:
    """Stable short digest (not Python's salted ``hash``): it is stored in session state."""
    h = _B8.copy()
    h.update(text.encode())
    return h.hexdigest()
