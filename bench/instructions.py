"""Instructions per input of bench/engine.py's workloads, Eddies against Flink Agents, by callgrind.

Wall time on these machines swings 2x between hours, which is more than the gap being
measured; instruction counts do not. Each side runs under ``valgrind --tool=callgrind``
twice, with ``--base`` inputs and with ``--base + --inputs`` (after the same warm-up), and
the difference divided by ``--inputs`` is its cost per input: start-up, imports and the
warm-up cancel out. Eddies runs with the in-memory (objects) journal or, with
``--avro``, the Avro-bytes one; Flink Agents 0.3.1's local runner runs bench/flink_agents.py
in ``.venv-flink-agents`` (``make bench-flink-agents``), which has no durability.

Run: ``.venv/bin/python bench/instructions.py`` (``make bench-instructions``), about ten
minutes (callgrind runs code ~50x slower). Needs valgrind. Instructions are not time (a
cache miss costs more than an add), but both sides are the same CPython doing the same
kind of work, so their ratio is a steadier reading of the speed-up than two timed runs.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FLINK_AGENTS_PYTHON = ROOT / ".venv-flink-agents" / "bin" / "python"
REFERENCE_WORKLOADS = ("input->output", "input->chat->output", "react-1-tool")
COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")


def _eddies_child(name: str, inputs: int, avro: bool) -> None:
    """Runs in the measured process: the warm-up, then ``inputs`` inputs of ``name``."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import engine  # bench/engine.py

    engine.per_input_us(name, 200, 10)
    engine.per_input_us(name, inputs, 100, avro)


def instructions(command: list[str]) -> int:
    """The instructions callgrind counts for ``command`` (all its threads)."""
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/out", *command],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT,
            env=dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True", LITELLM_OFFLINE_MODE="true"),
        )
    found = COLLECTED.search(proc.stderr)
    if proc.returncode != 0 or found is None:
        raise RuntimeError(f"{' '.join(command)} failed under callgrind:\n{proc.stderr[-2000:]}")
    return int(found.group(1))


def per_input(command: list[str], base: int, inputs: int) -> float:
    """Instructions per input: two runs of ``command`` + [n], n = base and base + inputs."""
    low = instructions([*command, str(base)])
    high = instructions([*command, str(base + inputs)])
    return (high - low) / inputs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--inputs", type=int, default=1000, help="the measured difference")
    parser.add_argument("--base", type=int, default=200, help="inputs of the shorter run")
    parser.add_argument("--workloads", default=",".join(REFERENCE_WORKLOADS),
                        help="comma-separated names from bench/engine.py")
    parser.add_argument("--avro", action="store_true", help="Eddies' journal holds Avro bytes")
    parser.add_argument("--child", nargs=2, metavar=("WORKLOAD", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _eddies_child(args.child[0], int(args.child[1]), args.avro)
        return
    if shutil.which("valgrind") is None:
        parser.error("valgrind is not installed (apt-get install valgrind)")
    reference = FLINK_AGENTS_PYTHON.exists()
    journal = "Avro bytes" if args.avro else "objects"
    print(f"instructions per input (callgrind, difference of {args.base} and "
          f"{args.base + args.inputs} inputs over 100 sessions); Eddies' journal: {journal}; "
          + ("Flink Agents 0.3.1 measured too" if reference else
             "no .venv-flink-agents (make bench-flink-agents): Eddies only"))
    print(f"{'workload':24} {'Eddies':>12} {'Flink Agents':>13} {'speed-up':>9}")
    for name in [w for w in args.workloads.split(",") if w]:
        ours = per_input([sys.executable, __file__, *(["--avro"] if args.avro else []), "--child",
                          name], args.base, args.inputs)
        row = f"{name:24} {ours:12,.0f}"
        if reference and name in REFERENCE_WORKLOADS:
            theirs = per_input([str(FLINK_AGENTS_PYTHON), str(Path(__file__).with_name("flink_agents.py")),
                                "--repeats", "1", "--workloads", name, "--inputs"], args.base, args.inputs)
            row += f" {theirs:13,.0f} {theirs / ours:8.2f}x"
        print(row, flush=True)


if __name__ == "__main__":
    main()
