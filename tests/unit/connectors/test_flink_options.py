"""Where a Flink run restores from: --from-savepoint takes the savepoint or the directory
``eddies flink stop --savepoint`` was given."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from eddies.connectors.flink.options import savepoint_in


def savepoint(path: Path, mtime: float) -> Path:
    path.mkdir(parents=True)
    (path / "_metadata").write_bytes(b"x")
    os.utime(path / "_metadata", (mtime, mtime))
    return path


def test_a_savepoint_or_the_newest_in_the_directory_stop_wrote_to(tmp_path: Path) -> None:
    backups = tmp_path / "backups"
    older = savepoint(backups / "savepoint-1b8095-3fc1ee5fafdc", 1_000)
    assert savepoint_in(older) == older.resolve()
    assert savepoint_in(backups) == older.resolve()
    newer = savepoint(backups / "savepoint-1b8095-99aa00bb11cc", 2_000)
    (backups / "savepoint-1b8095-incomplete").mkdir()  # no _metadata: still being written
    assert savepoint_in(backups) == newer.resolve()
    assert savepoint_in(tmp_path) is None  # neither a savepoint nor a stop's directory
    assert savepoint_in(tmp_path / "nothing") is None


def test_a_path_with_no_savepoint_fails_at_start_naming_it(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from eddies.connectors.flink.options import FlinkOptions
    from eddies.connectors.runtime.settings import Settings

    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match="--from-savepoint empty: no savepoint there"):
        FlinkOptions.for_run(Settings(app="a"), savepoint="empty", fresh=False)
