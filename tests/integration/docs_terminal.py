"""What the docs walkthrough tests (test_docs_walkthrough.py) read and run: the pages'
fenced blocks and command lines, and a terminal in a new folder with only the
virtualenv's bin on PATH, whose commands run as a newcomer's would."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent  # the virtualenv's bin, where the `eddies` script is
README = ROOT / "README.md"
DOCS = ROOT / "docs"
ANSWER_S = 60.0  # the longest a worker may take to answer (its own start included)
LOG_LINES = 40  # of a command's output, shown when it fails


# --- the pages -------------------------------------------------------------------------------

def fences(text: str, lang: str, indent: str = "") -> list[str]:
    """The bodies of the ``lang`` fences of ``text`` (opened at ``indent``), in order."""
    return re.findall(rf"^{indent}```{re.escape(lang)}\n(.*?)^{indent}```", text, flags=re.S | re.M)


def page(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def tutorial() -> str:
    """The README's tutorial, between its markers (the part the site includes too)."""
    text = README.read_text(encoding="utf-8")
    return text.split("<!-- --8<-- [start:tutorial] -->")[1].split("<!-- --8<-- [end:tutorial] -->")[0]


def lines_of(block: str) -> list[str]:
    return [line for line in block.splitlines() if line.strip()]


def uncommented(line: str) -> str:
    """``line`` without its comment, as sh reads it: a ``#`` starts one only at the start of
    a word (shlex's ``comments=True`` would also cut ``--agent agents.sql#taglines``)."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def words(line: str) -> list[str]:
    return shlex.split(uncommented(line))


def option(line: str, name: str) -> str:
    ws = words(line)
    return ws[ws.index(name) + 1]


def spans(text: str, start: str) -> list[str]:
    """The inline code spans of ``text`` that start with ``start``, a line break in one
    read as a space (prose wraps them)."""
    return [" ".join(s.split()) for s in re.findall(rf"`({re.escape(start)}[^`]*)`", text)]


# --- a terminal in a new folder --------------------------------------------------------------

class Terminal:
    """A shell in the new folder: each line runs as ``sh -c LINE`` there, with what
    ``export`` set so far; a line ending in ``&`` runs in the background (its output in a
    log file) until it is stopped or the module ends."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        # The venv's bin first, and nothing else of the repository: no PYTHONPATH, no
        # developer's EDDIES_ settings (the commands must find their broker as the page says).
        path = [BIN.as_posix()] + [p for p in os.environ.get("PATH", "").split(os.pathsep)
                                   if p and not p.startswith(ROOT.as_posix())]
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("EDDIES_", "PYTHON", "VIRTUAL_ENV", "PYTEST"))}
        self.env.update(PATH=os.pathsep.join(path), LITELLM_LOCAL_MODEL_COST_MAP="True",
                        LITELLM_OFFLINE_MODE="true")
        # What runs in the background: the process, its log, its command line.
        self.background: list[tuple[subprocess.Popen[bytes], Path, str]] = []

    def write(self, name: str, text: str) -> Path:
        path = self.folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    def run(self, line: str, timeout: float = 120.0, **env: str) -> subprocess.CompletedProcess[str]:
        """Run ``line``; an ``export NAME=VALUE`` line sets NAME for the lines after it."""
        ws = words(line)
        if ws and ws[0] == "export":
            for word in ws[1:]:
                name, _, value = word.partition("=")
                self.env[name] = value
            return subprocess.CompletedProcess(line, 0, "", "")
        return subprocess.run(["sh", "-c", line], cwd=self.folder, env={**self.env, **env},
                              capture_output=True, text=True, timeout=timeout)

    def ok(self, line: str, *shows: str, timeout: float = 120.0, **env: str) -> str:
        """Run ``line``: it must exit 0 and print each of ``shows`` (on either stream: a
        command's notes go to stderr); its output."""
        proc = self.run(line, timeout=timeout, **env)
        assert proc.returncode == 0 and all(s in proc.stdout + proc.stderr for s in shows), \
            report(line, proc, shows)
        return proc.stdout

    def until(self, line: str, *shows: str, timeout: float = ANSWER_S) -> str:
        """Run ``line`` again until it exits 0 and prints each of ``shows``, as a reader
        runs `eddies tail --no-follow` again while the worker is still answering."""
        deadline = time.monotonic() + timeout
        while True:
            proc = self.run(line)
            if proc.returncode == 0 and all(s in proc.stdout for s in shows):
                return proc.stdout
            assert time.monotonic() < deadline, report(line, proc, shows) + self.logs()
            time.sleep(0.5)

    def start(self, line: str, log: str, **env: str) -> subprocess.Popen[bytes]:
        """Start ``line`` (its trailing ``&`` optional) in the background, its output in
        ``log`` in the folder."""
        command = uncommented(line).removesuffix("&").rstrip()
        path = self.folder / log
        with path.open("wb") as out:
            # exec: the process is the command itself, so SIGTERM reaches it; a session
            # of its own, so its children (an MCP server) go with it if it must be killed.
            proc = subprocess.Popen(["sh", "-c", "exec " + command], cwd=self.folder,
                                    env={**self.env, **env}, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        self.background.append((proc, path, command))
        return proc

    def wait_log(self, proc: subprocess.Popen[bytes], pattern: str,
                 timeout: float = ANSWER_S) -> re.Match[str]:
        """The first match of ``pattern`` in the output of background ``proc``."""
        [(path, command)] = [(p, c) for q, p, c in self.background if q is proc]
        deadline = time.monotonic() + timeout
        while True:
            found = re.search(pattern, path.read_text(errors="replace"), flags=re.M)
            if found:
                return found
            assert proc.poll() is None or time.monotonic() < deadline, \
                f"{command}: exited {proc.returncode} without {pattern!r}\n{tail_of(path)}"
            assert time.monotonic() < deadline, f"{command}: no {pattern!r} in {timeout} s\n{tail_of(path)}"
            time.sleep(0.2)

    def stop(self, proc: subprocess.Popen[bytes]) -> int:
        """Stop ``proc`` as Ctrl-C's neighbour SIGTERM does; killed (with its children) if
        it does not stop within 20 s. Its exit code."""
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        return proc.returncode

    def logs(self) -> str:
        return "".join(f"\n--- {p.name} ({c}):\n{tail_of(p)}" for _, p, c in self.background)

    def close(self) -> None:
        for proc, _, _ in reversed(self.background):  # the broker last
            self.stop(proc)


def tail_of(path: Path) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-LOG_LINES:])


def report(line: str, proc: subprocess.CompletedProcess[str], shows: tuple[str, ...] = ()) -> str:
    out = "\n".join(proc.stdout.splitlines()[-LOG_LINES:])
    return f"$ {line}\nexit {proc.returncode}; expected {shows}\n{out}\n{proc.stderr[-3000:]}"
