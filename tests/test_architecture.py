"""The house's rules, read from the import graph of ``src/`` (issue: the house shows its
architecture).

* ``actors`` never imports ``scheduler``.
* ``scheduler`` is split into rooms by layer; a room imports only the rooms below it
  (``LAYERS``), counting imports made only for type checking, so no two rooms lean on each
  other. The daemon, the command line and the public doors use the core through its package
  (``scheduler.core``: the names its ``__init__`` exports), never its modules.
* No import cycle between modules at run time; an import deferred into a function counts.
* Each room's ``__init__`` has a docstring that says what it holds and what it may import.
* No class over 500 lines, no file over 800.

Every import statement is read, wherever it stands: at the top, under ``TYPE_CHECKING``
(a type-only import) or inside a function (a deferred one).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"
GENERATED = {"scheduler.si.si_pb2", "scheduler.si.si_pb2_grpc"}

#: The rooms, bottom up. A room may import the rooms named for it (and itself); ``_errors``
#: is the exception types every room raises. ``doors`` are the public modules
#: (``scheduler``, ``scheduler.client``, ``scheduler.testing``, ``scheduler.pytest_plugin``).
LAYERS: dict[str, set[str]] = {
    "_errors": set(),
    "si": {"_errors"},
    "config": {"_errors", "si"},
    "objects": {"_errors", "si", "config"},
    "policies": {"_errors", "si", "config", "objects"},
    "gangs": {"_errors", "si", "config", "objects", "policies"},
    "core": {"_errors", "si", "config", "objects", "policies", "gangs"},
    "daemon": {"_errors", "si", "config", "core"},
    "client": {"_errors", "si", "daemon"},
    "doors": {"_errors", "si", "config", "core", "daemon", "client"},
    "simulate": {"_errors", "si", "config", "core", "daemon", "client", "doors"},
    "cli": {"_errors", "si", "config", "core", "daemon", "client", "doors", "simulate"},
    "main": {"cli", "doors"},
}
#: Rooms that may import the actor runtime, and those that may only name its types.
ACTORS_AT_RUN_TIME = {"gangs", "core", "doors"}
ACTORS_TYPES_ONLY = {"objects"}
#: Rooms that see the core only through its package.
CORE_BY_PACKAGE = {"daemon", "client", "doors", "simulate", "cli"}


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # the imported module (a module of src/, as precise as the statement says)
    kind: str  # "top", "type" (under TYPE_CHECKING) or "deferred" (inside a function)
    line: int


def modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in sorted(SRC.rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = modules()


def _targets(module: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        package = module.split(".")
        if MODULES[module].name != "__init__.py":
            package.pop()
        package = package[: len(package) - node.level + 1]
        base = ".".join([*package, node.module] if node.module else package)
    else:
        base = node.module or ""
    # ``from scheduler.si import si_pb2`` imports a module; ``from x import Name``, x.
    return [
        f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base
        for alias in node.names
    ]


def _walk(module: str, node: ast.AST, kind: str) -> Iterator[Import]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
            for stmt in child.body:
                yield from _walk(module, ast.Module(body=[stmt], type_ignores=[]), "type")
            for stmt in child.orelse:
                yield from _walk(module, ast.Module(body=[stmt], type_ignores=[]), kind)
            continue
        if isinstance(child, ast.Import | ast.ImportFrom):
            for target in _targets(module, child):
                while target not in MODULES and "." in target:
                    target = target.rsplit(".", 1)[0]
                if target in MODULES and target != module:
                    yield Import(module, target, kind, child.lineno)
            continue
        inner = kind
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) and kind == "top":
            inner = "deferred"
        yield from _walk(module, child, inner)


def imports() -> list[Import]:
    return [
        imp
        for module, path in MODULES.items()
        if module not in GENERATED
        for imp in _walk(module, ast.parse(path.read_text()), "top")
    ]


IMPORTS = imports()


def room(module: str) -> str | None:
    """The room of a module of ``scheduler`` (None for ``actors``)."""
    parts = module.split(".")
    if parts[0] != "scheduler":
        return None
    if len(parts) == 1 or parts[1] in {"testing", "pytest_plugin"}:
        return "doors"
    if parts[1] == "__main__":
        return "main"
    return parts[1]


def test_every_module_is_in_a_room() -> None:
    rooms = {room(m) for m in MODULES if m.startswith("scheduler")}
    assert rooms <= set(LAYERS), rooms - set(LAYERS)


def test_actors_never_imports_scheduler() -> None:
    bad = [i for i in IMPORTS if i.source.startswith("actors") and i.target.startswith("sch")]
    assert not bad, bad


def test_rooms_import_only_the_rooms_below() -> None:
    bad = []
    for i in IMPORTS:
        src, dst = room(i.source), room(i.target)
        if src is None or dst is None or src == dst:
            continue
        if dst not in LAYERS[src]:
            bad.append(f"{i.source}:{i.line} ({src}) imports {i.target} ({dst}), {i.kind}")
    assert not bad, "\n".join(bad)


def test_only_the_upper_rooms_run_actors() -> None:
    bad = []
    for i in IMPORTS:
        src = room(i.source)
        if src is None or not i.target.startswith("actors"):
            continue
        if src in ACTORS_AT_RUN_TIME or (src in ACTORS_TYPES_ONLY and i.kind == "type"):
            continue
        bad.append(f"{i.source}:{i.line} imports {i.target}, {i.kind}")
    assert not bad, "\n".join(bad)


def test_the_outer_rooms_use_the_core_through_its_package() -> None:
    bad = [
        f"{i.source}:{i.line} imports {i.target}"
        for i in IMPORTS
        if room(i.source) in CORE_BY_PACKAGE and i.target.startswith("scheduler.core.")
    ]
    assert not bad, "\n".join(bad)


def test_no_import_cycle_at_run_time() -> None:
    graph: dict[str, set[str]] = {}
    for i in IMPORTS:
        if i.kind != "type":
            graph.setdefault(i.source, set()).add(i.target)
    cycles = _cycles(graph)
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each strongly connected component that has one (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_the_graph_sees_every_kind_of_import() -> None:
    kinds = {i.kind for i in IMPORTS}
    assert kinds == {"top", "type", "deferred"}
    assert any(i.source == "scheduler.cli._app" for i in IMPORTS)


@pytest.mark.parametrize("name", sorted(set(LAYERS) - {"_errors", "doors", "main"}))
def test_each_room_says_what_it_holds_and_may_import(name: str) -> None:
    init = SRC / "scheduler" / name / "__init__.py"
    doc = ast.get_docstring(ast.parse(init.read_text())) or ""
    assert len(doc.split()) >= 30, f"{init}: the room's docstring says too little"
    assert "import" in doc, f"{init}: the docstring does not say what the room may import"


def test_no_class_over_500_lines_and_no_file_over_800() -> None:
    bad = []
    for module, path in MODULES.items():
        if module in GENERATED:
            continue
        text = path.read_text()
        if len(text.splitlines()) > 800:
            bad.append(f"{path.relative_to(SRC)}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                size = node.end_lineno - node.lineno + 1
                if size > 500:
                    bad.append(f"{path.relative_to(SRC)}: class {node.name}, {size} lines")
    assert not bad, "\n".join(bad)
