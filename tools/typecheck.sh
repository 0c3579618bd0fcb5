#!/usr/bin/env bash
# mypy --strict on every package as installed (eddies, eddies.events, .engine, .connectors),
# and on the kill -9 campaign (tools/chaos): the layers live at the repository root, so mypy
# reads them through a tree of links that has the installed package layout.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
tree="$root/.typecheck"
rm -rf "$tree"
mkdir -p "$tree/eddies"
for f in "$root"/eddies/*; do ln -s "$f" "$tree/eddies/$(basename "$f")"; done
for layer in events engine connectors schemas; do ln -s "$root/$layer" "$tree/eddies/$layer"; done
ln -s "$root/tools/chaos" "$tree/chaos"
cd "$tree"
"$root/.venv/bin/mypy" --config-file "$root/pyproject.toml" --strict -p eddies -p chaos
