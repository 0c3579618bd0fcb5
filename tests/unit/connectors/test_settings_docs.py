"""The settings tables in docs/operations/ name every setting, its variable and its default,
as `Settings` has them: a new, renamed or changed setting updates the docs with it."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from eddies.connectors.runtime.settings import Settings

DOCS = Path(__file__).resolve().parents[3] / "docs" / "operations"
#: Where each setting is documented: the Flink job's in its own page.
PAGES = ("configuration.md", "flink.md")


def _rows() -> dict[str, tuple[str, str]]:
    """key -> (env cell, default cell) of every settings table row; a row may name several
    keys (``| `a`, `b` | ... | 5, 5 |``): each gets its own default."""
    rows: dict[str, tuple[str, str]] = {}
    for page in PAGES:
        for line in (DOCS / page).read_text().splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            keys = re.findall(r"`(\w+)`", cells[0]) if line.startswith("| `") else []
            if len(cells) < 4 or not keys or not re.fullmatch(r"(`\w+`,? ?)+", cells[0]):
                continue
            defaults = [d.strip() for d in cells[2].split(",")] if len(keys) > 1 else [cells[2]]
            for key, default in zip(keys, defaults, strict=True):
                rows[key] = (cells[1], default)
    return rows


def _documented_default(value: object) -> str:
    """How a default is written first in its cell: ``8``, ``false``, ```all```, ``empty``."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return str(value)
    return f"`{value}`" if value else "empty"


def test_every_setting_is_documented_with_its_variable_and_default() -> None:
    rows = _rows()
    defaults = Settings()
    for f in dataclasses.fields(Settings):
        if f.name == "kafka":  # the [kafka] table: librdkafka's own settings
            continue
        assert f.name in rows, f"setting {f.name!r} is in no table of docs/operations/{PAGES}"
        env, default = rows[f.name]
        env_name = f"EDDIES_{f.name.upper()}"
        assert env_name in env or "..." in env, f"{f.name}: its variable {env_name} is not named"
        written = _documented_default(getattr(defaults, f.name))
        # A path-like default is described where it is empty ("`share/eddies/flink` in ...").
        if written == "empty" and f.name.endswith(("_dir", "_jars")):
            continue
        assert default.startswith(written), f"{f.name}: documented default {default!r}, is {written}"


def test_every_documented_setting_exists() -> None:
    known = {f.name for f in dataclasses.fields(Settings)}
    assert set(_rows()) - known == set(), "documented settings that Settings does not have"
