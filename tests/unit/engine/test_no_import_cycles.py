"""The engine's modules (and the events they build on) import no one in a circle,
counting imports under ``if TYPE_CHECKING:`` and inside functions."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.import_graph import PACKAGES, assert_no_cycles, cycles, module_graph


def test_engine_and_events_have_no_import_cycles() -> None:
    assert_no_cycles({name: PACKAGES[name] for name in ("eddies.engine", "eddies.events")})


def test_the_checker_sees_type_checking_function_local_and_from_package_imports(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import B\n")
    (pkg / "b.py").write_text("def f():\n    from . import c\n")
    (pkg / "c.py").write_text("from pkg import a\n")
    (pkg / "d.py").write_text("import pkg.a\n")
    graph = module_graph({"pkg": pkg})
    assert graph["pkg.a"] == {"pkg.b"} and graph["pkg.b"] == {"pkg.c"} and graph["pkg.d"] == {"pkg.a"}
    assert cycles(graph) == [["pkg.a", "pkg.b", "pkg.c"]]
    with pytest.raises(AssertionError, match=r"pkg\.a -> pkg\.b -> pkg\.c -> pkg\.a"):
        assert_no_cycles({"pkg": pkg})
