"""Session ids spread over partitions, so that every worker of a test has work."""

from __future__ import annotations

from eddies.events import partition_for


def sessions_on_every_partition(prefix: str, partitions: int, each: int) -> list[str]:
    """``each`` session ids ``{prefix}{n}`` per partition, interleaved: the first
    ``partitions`` ids are on different partitions."""
    chosen: dict[int, list[str]] = {p: [] for p in range(partitions)}
    n = 0
    while any(len(c) < each for c in chosen.values()):
        sid = f"{prefix}{n}"
        part = chosen[partition_for(sid, partitions)]
        if len(part) < each:
            part.append(sid)
        n += 1
    return [chosen[p][i] for i in range(each) for p in range(partitions)]
