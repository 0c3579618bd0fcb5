"""The README's Python snippets and the docstring examples run as written."""

from __future__ import annotations

import doctest
import re
from pathlib import Path

import pytest

import eddies.events.ids
import eddies.events.partitioner
import eddies.events.values

ROOT = Path(__file__).resolve().parents[2]


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)


@pytest.mark.parametrize("block", _python_blocks())
def test_readme_python_blocks_run(block: str, capsys: pytest.CaptureFixture[str]) -> None:
    exec(compile(block, "README.md", "exec"), {"__name__": "readme"})
    out = capsys.readouterr().out
    # A printed result in the snippet is documented as a comment right after print().
    for expected in re.findall(r"^# (\[.*\])$", block, flags=re.M):
        assert expected in out


def test_readme_has_snippets() -> None:
    assert _python_blocks()


@pytest.mark.parametrize("module", [eddies.events.values, eddies.events.partitioner, eddies.events.ids])
def test_docstring_examples(module: object) -> None:
    result = doctest.testmod(module)  # type: ignore[arg-type]
    assert result.attempted > 0 and result.failed == 0
