"""Where a Flink run keeps things and what it restores from; no PyFlink import.

- checkpoints: ``flink_checkpoint_dir``, default ``.eddies/flink/APP/checkpoints`` under the
  working directory (Flink writes ``<job id>/chk-<n>/_metadata`` there and keeps the last
  two, also when the job is cancelled);
- restore: ``--from-savepoint DIR``, else the newest complete checkpoint there (a process
  killed mid-stream resumes where its last checkpoint left it), unless ``--fresh``;
- temporary files: one directory per run (Flink's io.tmp.dirs, the JVM's java.io.tmpdir
  and its logs), removed when the run ends, or by the next run when it was killed.

Example::

    options = FlinkOptions.for_run(settings, savepoint=None, fresh=False, jobmanager="")
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from eddies.connectors.runtime.settings import Settings


@dataclass(frozen=True)
class FlinkOptions:
    """One run's directories, restore path and target."""

    checkpoint_dir: Path
    restore_from: Path | None
    tmp_dir: Path
    jobmanager: str = ""  # HOST:PORT of a remote cluster's REST endpoint; empty: in process
    embedded: bool = False  # on the embedded broker: the development result key is allowed

    @classmethod
    def for_run(cls, settings: Settings, *, savepoint: str | None, fresh: bool,
                jobmanager: str = "", embedded: bool = False) -> FlinkOptions:
        """Options of a run of ``settings.app``."""
        cdir = checkpoint_dir(settings)
        cdir.mkdir(parents=True, exist_ok=True)
        restore: Path | None = None
        if savepoint:
            restore = savepoint_in(Path(savepoint))
            if restore is None:
                raise FileNotFoundError(f"--from-savepoint {savepoint}: no savepoint there "
                                        "(a savepoint directory holds a _metadata file)")
        elif not fresh:
            restore = latest_checkpoint(cdir)
        remove_stale_tmp_dirs()
        tmp = Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{os.getpid()}-"))
        return cls(cdir, restore, tmp, jobmanager, embedded)


#: Temporary directories of runs: ``eddies-flink-<pid>-<random>`` in the system's.
TMP_PREFIX = "eddies-flink-"


def remove_stale_tmp_dirs() -> list[Path]:
    """Remove the temporary directories of runs whose process is gone (killed: nothing
    removed them); the ones removed."""
    removed = []
    for d in Path(tempfile.gettempdir()).glob(f"{TMP_PREFIX}*-*"):
        pid = d.name[len(TMP_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's
        return True
    return True


def checkpoint_dir(settings: Settings) -> Path:
    """Where the job's checkpoints go."""
    if settings.flink_checkpoint_dir:
        return Path(settings.flink_checkpoint_dir).resolve()
    return (Path(".eddies") / "flink" / settings.app / "checkpoints").resolve()


def savepoint_in(path: Path) -> Path | None:
    """The savepoint at ``path``, or, when ``path`` is the directory given to ``eddies
    flink stop --savepoint`` (Flink writes each savepoint into a ``savepoint-*``
    directory of its own there), the newest complete one in it; None if there is none."""
    path = path.resolve()
    if (path / "_metadata").is_file():
        return path
    found = sorted((meta.stat().st_mtime, meta.parent) for meta in path.glob("savepoint-*/_metadata"))
    return found[-1][1] if found else None


def latest_checkpoint(directory: Path) -> Path | None:
    """The newest complete checkpoint under ``directory`` (any job's), or None. Complete:
    Flink writes ``_metadata`` last."""
    best: tuple[float, Path] | None = None
    for meta in directory.glob("*/chk-*/_metadata"):
        stamp = meta.stat().st_mtime
        if best is None or stamp > best[0]:
            best = (stamp, meta.parent)
    return None if best is None else best[1]
