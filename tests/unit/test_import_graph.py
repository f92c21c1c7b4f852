"""The package's import graph has no cycles and no oversized modules (issue 16).

Imports are read with `ast` from every module under raims_node/, including imports
inside functions and `if TYPE_CHECKING:` blocks: a cycle hidden behind a late import is
still a cycle in the design.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "raims_node"
MAX_MODULE_LINES = 600
MAX_CLASS_LINES = 400


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PKG.rglob("*.py")}


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The raims_node modules `name` imports (a package import counts as its __init__)."""
    tree = ast.parse(path.read_text(), str(path))
    is_pkg = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = name.split(".") if is_pkg else name.split(".")[:-1]
                pkg = pkg[: len(pkg) - (node.level - 1)]
                base = ".".join([*pkg, base] if base else pkg)
            targets = [f"{base}.{a.name}" for a in node.names] + [base]
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name:
                out.add(t)
    return out


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def import_graph() -> dict[str, set[str]]:
    mods = _modules()
    known = set(mods)
    graph = {name: _imports(name, path, known) for name, path in mods.items()}
    # a package's __init__ re-exporting its own modules is not a cycle with them
    for name, deps in graph.items():
        deps -= {d for d in deps if name.startswith(d + ".") and mods[d].name == "__init__.py"}
    return graph


def test_no_import_cycles_between_modules() -> None:
    assert _cycles(import_graph()) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_modules_and_classes_stay_small() -> None:
    big = []
    for path in PKG.rglob("*.py"):
        text = path.read_text()
        lines = text.count("\n")
        if lines > MAX_MODULE_LINES:
            big.append(f"{path.relative_to(ROOT)}: {lines} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                size = node.end_lineno - node.lineno + 1
                if size > MAX_CLASS_LINES:
                    big.append(f"{path.relative_to(ROOT)}: class {node.name} {size} lines")
    assert big == []
