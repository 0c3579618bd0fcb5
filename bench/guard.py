"""The hot paths' cost in instructions, checked against a committed baseline (CI runs this).

Wall time on these shared machines moves by 20-40% within an hour; instructions counted by
callgrind repeat to about 0.1%. So CI guards speed by counting: the worker's hot path
(``bench/worker_cpu.py``: one-turn sessions through the real Orchestrator and local
executor, in-memory clients) per session, and ``bench/engine.py``'s three shared workloads
(Avro-bytes journal) per input. Each is counted twice in one process under
``valgrind --tool=callgrind --instr-atstart=no``: imports and a warm-up run uncounted, then
``n`` units and ``2n`` units, each between two dumps; the difference divided by ``n`` is
the cost of one unit, whatever the start-up and a measurement's fixed part cost.

Run: ``.venv/bin/python bench/guard.py`` (``make bench-guard``), about a minute. It prints
each workload against ``bench/baseline.json`` and exits 1 when one costs more than the
baseline's tolerance in two counts (a workload over it is counted again, and fails only if
the second count is over too). A change that has to cost more updates the baseline in the
same commit (``--update``) with a line in bench/RESULTS.md saying why; a change that saves
should update it too, so that the saving cannot be spent silently later.

Example::

    .venv/bin/python bench/guard.py                      # check
    .venv/bin/python bench/guard.py --workloads worker   # one workload
    .venv/bin/python bench/guard.py --update             # write the measured counts
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import runpy
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BASELINE = Path(__file__).with_name("baseline.json")
#: name -> (what one unit is, n: the units of the shorter count)
WORKLOADS = {
    "worker": ("session", 250),  # one consumer batch of bench/worker_cpu.py
    "input->output": ("input", 300),
    "input->chat->output": ("input", 150),
    "react-1-tool": ("input", 100),
}
#: Packages whose code runs on the counted paths; their versions are kept with the baseline.
PACKAGES = ("orjson", "fastavro", "confluent-kafka")
TOTALS = re.compile(r"^totals:\s*(\d+)", re.MULTILINE)


def environment() -> dict[str, str]:
    """What the counts depend on besides the project's code."""
    found = {"python": f"{platform.python_implementation()} {platform.python_version()} "
                       f"({platform.machine()})"}
    for name in PACKAGES:
        found[name] = metadata.version(name)
    return found


# --- the counted process -------------------------------------------------------------------
def _control(*args: str) -> None:
    """callgrind_control on this very process (it runs under callgrind)."""
    subprocess.run(["callgrind_control", *args, str(os.getpid())], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _worker_runner() -> Callable[[int], None]:
    import gc

    import worker_cpu  # bench/worker_cpu.py

    from eddies.connectors.runtime.client import input_event
    from eddies.events import encode

    gc.freeze()  # as `eddies worker` does, and as worker_cpu.py runs
    gc.set_threshold(50_000, 20, 100)
    _, n = WORKLOADS["worker"]
    prompts = [encode(input_event(f"s{i}", f"hello {i}")) for i in range(4 * n)]
    worker_cpu.WorkerPath().sessions(0, n, prompts)  # warm-up, uncounted

    def run(units: int) -> None:
        path = worker_cpu.WorkerPath()
        path.sessions(0, units, prompts)
        assert path.outputs == units, (path.outputs, units)
    return run


def _engine_runner(name: str) -> Callable[[int], None]:
    import engine  # bench/engine.py

    engine.per_input_us(name, 200, 10, True)  # warm-up, uncounted

    def run(units: int) -> None:
        engine.per_input_us(name, units, 100, True)
    return run


def child(names: list[str], patch: str | None) -> None:
    """Runs under callgrind: each workload's ``n`` and ``2n`` units between dumps."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    if patch:  # tests make a hot path slower on purpose, to see the guard fail
        runpy.run_path(patch)
    for name in names:
        run = _worker_runner() if name == "worker" else _engine_runner(name)
        _, n = WORKLOADS[name]
        _control("--instr=on")
        for units in (n, 2 * n):
            _control("--dump")  # counters from here
            run(units)
            _control("--dump")  # ... to here
        _control("--instr=off")


# --- the parent ----------------------------------------------------------------------------
def count(names: list[str], patch: str | None = None) -> dict[str, float]:
    """Instructions per unit of each workload, counted in one process under callgrind."""
    with tempfile.TemporaryDirectory() as tmp:
        command = ["valgrind", "--tool=callgrind", "--instr-atstart=no",
                   f"--callgrind-out-file={tmp}/cg.out", sys.executable, __file__,
                   "--child", ",".join(names), *(["--patch", patch] if patch else [])]
        env = dict(os.environ, PYTHONHASHSEED="0", LITELLM_LOCAL_MODEL_COST_MAP="True",
                   LITELLM_OFFLINE_MODE="true")
        proc = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env)
        if proc.returncode != 0:
            raise RuntimeError(f"the counted process failed:\n{proc.stderr[-3000:]}")
        dumps = sorted(Path(tmp).glob("cg.out.*"), key=lambda p: int(p.suffix[1:]))
        totals = [int(TOTALS.search(p.read_text()).group(1)) for p in dumps]  # type: ignore[union-attr]
    # Per workload four dumps: (before n, after n, before 2n, after 2n); the "before" ones
    # hold what ran between the workloads' counts.
    if len(totals) != 4 * len(names):
        raise RuntimeError(f"expected {4 * len(names)} dumps, found {len(totals)}")
    measured = {}
    for i, name in enumerate(names):
        short, long = totals[4 * i + 1], totals[4 * i + 3]
        measured[name] = (long - short) / WORKLOADS[name][1]
    return measured


def compare(measured: dict[str, float], baseline: dict[str, object]) -> list[str]:
    """Lines of the report; those starting with FAIL are over the tolerance."""
    tolerance = float(baseline["tolerance"])  # type: ignore[arg-type]
    counts: dict[str, float] = baseline["instructions"]  # type: ignore[assignment]
    lines = []
    for name, value in measured.items():
        unit = WORKLOADS[name][0]
        base = counts.get(name)
        if base is None:
            lines.append(f"FAIL {name}: {value:,.0f} instructions per {unit}, no baseline "
                         "(bench/guard.py --update)")
            continue
        change = value / base - 1
        verdict = "FAIL" if change > tolerance else "ok  "
        lines.append(f"{verdict} {name:22} {value:12,.0f} per {unit:7} baseline {base:12,.0f} "
                     f"{change:+7.2%} (tolerance {tolerance:+.1%})")
        if change < -tolerance:
            lines.append(f"     {name} got cheaper: bench/guard.py --update keeps the saving")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workloads", default=",".join(WORKLOADS),
                        help=f"comma-separated, of: {', '.join(WORKLOADS)}")
    parser.add_argument("--update", action="store_true", help="write the counts to baseline.json")
    parser.add_argument("--patch", help="a Python file run in the counted process first (tests)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child.split(","), args.patch)
        return 0
    names = [w for w in args.workloads.split(",") if w]
    unknown = sorted(set(names) - set(WORKLOADS))
    if unknown:
        parser.error(f"unknown workload(s) {unknown}; known: {', '.join(WORKLOADS)}")
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        print("valgrind is not installed (apt-get install valgrind): nothing counted")
        return 2
    baseline: dict[str, Any] = json.loads(BASELINE.read_text()) if BASELINE.exists() else {
        "tolerance": 0.01, "environment": {}, "instructions": {}}
    here = environment()
    try:
        measured = count(names, args.patch)
    except RuntimeError as err:
        print(f"error: {err}")
        return 2
    if args.update:
        baseline["environment"] = here
        baseline["instructions"].update({k: round(v) for k, v in measured.items()})
        BASELINE.write_text(json.dumps(baseline, indent=2) + "\n")
        print(f"wrote {BASELINE.relative_to(ROOT)}: " +
              ", ".join(f"{k} {v:,.0f}" for k, v in measured.items()))
        return 0
    if baseline["environment"] != here:
        print(f"note: the baseline was counted with {baseline['environment']}, this is {here}")
    counts, tolerance = baseline["instructions"], float(baseline["tolerance"])
    over = [name for name, value in measured.items()
            if name in counts and value / counts[name] - 1 > tolerance]
    if over:
        # A count once seen 1-2% over inside a full test run was within the tolerance on its
        # own and in the next run: a workload fails only when a second count is over too (a
        # real cost is there every time).
        print(f"over the tolerance: {', '.join(over)}; counting {'it' if len(over) == 1 else 'them'} again")
        try:
            again = count(over, args.patch)
        except RuntimeError as err:
            print(f"error: {err}")
            return 2
        measured.update({name: min(measured[name], again[name]) for name in over})
    lines = compare(measured, baseline)
    print("\n".join(lines))
    return 1 if any(line.startswith("FAIL") for line in lines) else 0


if __name__ == "__main__":
    sys.exit(main())
