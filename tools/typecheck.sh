#!/usr/bin/env bash
# mypy --strict on every package as installed (eddies, eddies.events, .engine, .connectors),
# on the kill -9 campaign (tools/chaos) and on the benchmarks (bench/*.py, but
# flink_agents.py, which runs in Flink Agents' own virtualenv): the layers live at the
# repository root, so mypy reads them through a tree of links that has the installed
# package layout.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
tree="$root/.typecheck"
rm -rf "$tree"
mkdir -p "$tree/eddies"
for f in "$root"/eddies/*; do ln -s "$f" "$tree/eddies/$(basename "$f")"; done
for layer in events engine connectors schemas; do ln -s "$root/$layer" "$tree/eddies/$layer"; done
ln -s "$root/tools/chaos" "$tree/chaos"
ln -s "$root/bench" "$tree/bench"
cd "$tree"
benches=$(ls bench/*.py | grep -v '/flink_agents\.py$')
"$root/.venv/bin/mypy" --config-file "$root/pyproject.toml" --strict -p eddies -p chaos
# Files, not a package, and mypy takes one or the other per run.
# shellcheck disable=SC2086  # one argument per file
"$root/.venv/bin/mypy" --config-file "$root/pyproject.toml" --strict $benches

