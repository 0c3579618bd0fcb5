"""The import graph of the project's packages, read from source, and its cycles.

Every ``import`` counts: at module level, under ``if TYPE_CHECKING:`` and inside
functions, because each is a dependency a reader (and a refactoring) must follow even
when Python would tolerate the cycle at run time. Example::

    graph = module_graph({"eddies.engine": ROOT / "engine", "eddies.events": ROOT / "events"})
    assert not cycles(graph), describe(cycles(graph))
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

#: The project's packages and the folders they live in (see pyproject's package-dir).
ROOT = Path(__file__).resolve().parents[2]
PACKAGES: dict[str, Path] = {
    "eddies": ROOT / "eddies",
    "eddies.events": ROOT / "events",
    "eddies.engine": ROOT / "engine",
    "eddies.connectors": ROOT / "connectors",
    "eddies.schemas": ROOT / "schemas",
}


def modules(packages: Mapping[str, Path]) -> dict[str, Path]:
    """Every module of ``packages`` (name -> file), sub-packages included. A folder that is
    itself one of ``packages`` (``eddies.engine`` under ``eddies``' name) is left to it."""
    roots = {folder.resolve() for folder in packages.values()}
    found: dict[str, Path] = {}
    for package, folder in packages.items():
        folder = folder.resolve()
        for path in sorted(folder.rglob("*.py")):
            rel = path.relative_to(folder)
            # A nested folder listed as a package of its own belongs to that one.
            if any(p in roots and p != folder for p in path.parents if folder in p.parents):
                continue
            parts = list(rel.with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([package, *parts])] = path
    return found


def _imported(node: ast.Import | ast.ImportFrom, module: str, is_package: bool,
              known: Mapping[str, Path]) -> Iterable[str]:
    """The modules one import statement of ``module`` names (absolute names)."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield alias.name
        return
    if node.level:
        # Relative to the importing module's package (the module itself, for __init__).
        base = module.split(".")
        if not is_package:
            base = base[:-1]
        base = base[: len(base) - (node.level - 1)]
        target = ".".join([*base, node.module] if node.module else base)
    else:
        target = node.module or ""
    for alias in node.names:
        sub = f"{target}.{alias.name}"
        # ``from pkg import mod`` imports the module pkg.mod (pkg's __init__ only for a
        # name defined there: every submodule's import runs its package's __init__ anyway).
        yield sub if sub in known else target


def module_graph(packages: Mapping[str, Path]) -> dict[str, set[str]]:
    """``module -> modules it imports`` for every module of ``packages``, keeping only
    imports of modules among them (an import of a package counts as one of its
    ``__init__``)."""
    known = modules(packages)
    graph: dict[str, set[str]] = {name: set() for name in known}
    for name, path in known.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            for target in _imported(node, name, is_package, known):
                # ``import a.b.c`` also imports a and a.b; the deepest known one is the edge.
                while target and target not in known:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of ``graph`` with more than one module (Tarjan's
    algorithm, iterative: a deep chain must not hit the recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, Iterable[str]]] = []
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        work.append((start, iter(sorted(graph[start]))))
        while work:
            node, edges = work[-1]
            advanced = False
            for nxt in edges:
                if nxt not in graph:
                    continue
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _path_within(graph: Mapping[str, set[str]], component: list[str]) -> list[str]:
    """One concrete cycle through the component's first module (breadth-first: shortest)."""
    members = set(component)
    start = component[0]
    came: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt_frontier = []
        for node in frontier:
            for nxt in sorted(graph[node] & members):
                if nxt == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came[path[-1]])
                    return [*reversed(path), start]
                if nxt not in came:
                    came[nxt] = node
                    nxt_frontier.append(nxt)
        frontier = nxt_frontier
    return component


def describe(graph: Mapping[str, set[str]], found: list[list[str]]) -> str:
    """A failure message: each cycle's modules and one import path round it."""
    return "\n".join(
        f"{len(c)} modules import each other: {', '.join(c)}\n  e.g. {' -> '.join(_path_within(graph, c))}"
        for c in found)


def assert_no_cycles(packages: Mapping[str, Path]) -> None:
    """Fail, naming each cycle, if the modules of ``packages`` import each other in a circle.
    Example: ``assert_no_cycles({"eddies.engine": ROOT / "engine"})``."""
    graph = module_graph(packages)
    found = cycles(graph)
    assert not found, "import cycles (counting TYPE_CHECKING and function-local imports):\n" + \
        describe(graph, found)
