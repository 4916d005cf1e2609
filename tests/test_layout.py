"""The package's layout keeps its shape (../shared/DESIGN.md, "Layout"): no import circle, no private name imported
from another module, arrows that point one way, no module too long to hold in one's head without a reason.

Imports are read with `ast` from src/realm_hf; nothing is imported. An edge `a -> b` is an `import b` / `from b import
...` in `a` (`from b import c` is an edge to `b.c` when `c` is a module); importing `a.b.c` is an edge to `a.b.c` only,
not to its parent packages (as import-linter counts). Imports under `if TYPE_CHECKING:` are annotations, not edges.
`_lazy_exports` tables (names imported on first attribute access) are strings, not import statements: not edges.

Lazy imports (inside functions and methods) are checked separately from module-level ones:

- module level: the imports that run when a module is imported (under `if`/`try` too). A circle here is an import
  order bug waiting to happen.
- with lazy imports as well: a lazy import that closes a circle only hides it from the interpreter; the two modules
  still depend on each other, so it is a circle too. No exception either: a lazy import is for import *cost* (torch,
  faiss), never to break a circle.

Private: a name that starts with `_` belongs to its module; a module that starts with `_` (`pipelines/_utils.py`)
belongs to its package, whose modules may import from it.

Long: over 500 lines, a module says in its docstring "Why this module is long: ...".
"""

from __future__ import annotations

import ast
import pathlib
import re

import pytest

SRC = pathlib.Path(__file__).resolve().parents[1] / "src"
PACKAGE = "realm_hf"
MAX_LINES = 500
LONG_REASON = re.compile(r"Why this module is long:", re.IGNORECASE)

def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(path): path for path in sorted((SRC / PACKAGE).rglob("*.py"))}


def _is_package(module: str) -> bool:
    return MODULES[module].name == "__init__.py"


def _resolve(module: str, node: ast.ImportFrom) -> str:
    """The absolute module name of `from <node.module> import ...` written in `module`."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if _is_package(module) else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(module: str):
    """`(target module, imported name or None, lazy)` for every import statement of `module`."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))

    def visit(node: ast.AST, lazy: bool):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child):
                yield from (item for stmt in child.orelse for item in visit_one(stmt, lazy))
                continue
            yield from visit_one(child, lazy)

    def visit_one(node: ast.AST, lazy: bool):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, None, lazy
        elif isinstance(node, ast.ImportFrom):
            source = _resolve(module, node)
            for alias in node.names:
                yield source, alias.name, lazy
        else:
            inner = lazy or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            yield from visit(node, inner)

    yield from visit(tree, False)


def _graph(include_lazy: bool) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {module: set() for module in MODULES}
    for module in MODULES:
        for source, name, lazy in _imports(module):
            if lazy and not include_lazy:
                continue
            target = f"{source}.{name}" if name and f"{source}.{name}" in MODULES else source
            if target in MODULES and target != module:
                graph[module].add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def connect(node: str) -> None:  # iterative: no recursion limit on deep graphs
        work = [(node, iter(sorted(graph[node])))]
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        while work:
            current, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[current] = min(low[current], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[current])
                if low[current] == index[current]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == current:
                            break
                    if len(component) > 1:
                        components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return sorted(components)


def _path_in(component: list[str], graph: dict[str, set[str]]) -> str:
    """One circle through the component's first module, for the failure message."""
    members, start = set(component), component[0]
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        nxt = []
        for node in frontier:
            for child in sorted(graph[node] & members):
                if child == start:
                    return " -> ".join(paths[node] + [start])
                if child not in paths:
                    paths[child] = paths[node] + [child]
                    nxt.append(child)
        frontier = nxt
    return " <-> ".join(component)


def _circles(include_lazy: bool) -> list[str]:
    graph = _graph(include_lazy)
    return [_path_in(component, graph) for component in _cycles(graph)]


def test_the_layout_test_sees_circles():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_at_module_level():
    assert _circles(include_lazy=False) == []


def test_no_import_circle_counting_lazy_imports():
    assert _circles(include_lazy=True) == []


def _private_import(importer: str, source: str, name: str | None) -> bool:
    """Whether `from source import name` in `importer` takes a private name of another module. A private module
    (`pipelines/_utils.py`) is private to its package: its siblings and their submodules may import from it."""
    if not source.startswith(PACKAGE) or source == importer:
        return False
    if name is not None and name.startswith("_") and not name.startswith("__"):
        return True
    parts = source.split(".")
    for depth, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            owner = ".".join(parts[:depth])  # the package the private module belongs to
            if not importer.startswith(owner + "."):
                return True
    return False


def test_the_layout_test_sees_private_imports():
    assert _private_import("realm_hf.training.openqa", "realm_hf.training.pretrain", "_as_examples")
    assert _private_import("realm_hf.training.openqa", "realm_hf.pipelines._utils", "check_text")
    assert not _private_import("realm_hf.pipelines.open_qa", "realm_hf.pipelines._utils", "check_text")
    assert not _private_import("realm_hf.training.openqa", "realm_hf.training.loop", "as_examples")


def test_no_private_name_is_imported_from_another_module():
    found = [
        f"{module}: from {source} import {name}"
        for module in MODULES
        for source, name, _ in _imports(module)
        if _private_import(module, source, name)
    ]
    assert found == []


@pytest.mark.parametrize("module", sorted(MODULES))
def test_a_long_module_says_why(module):
    lines = len(MODULES[module].read_text(encoding="utf-8").splitlines())
    if lines <= MAX_LINES:
        return
    docstring = ast.get_docstring(ast.parse(MODULES[module].read_text(encoding="utf-8"))) or ""
    assert LONG_REASON.search(docstring), (
        f"{MODULES[module].relative_to(SRC.parent)} has {lines} lines (over {MAX_LINES}): split it by responsibility, "
        "or say in its docstring 'Why this module is long: ...'"
    )


APPLICATIONS = {"cli", "commands", "demo", "demo_data", "demo_defaults", "knowledge"}
"""The applications built on the library (top-level names under realm_hf); the library never imports them."""
FORBIDDEN = {
    # modeling knows nothing of faiss, the index or training
    "modeling": {"index", "training", "data", "corpus", "pipelines", "hub", "evaluation", "convert", "faiss"},
    # the index knows models only through an "embed these token batches" callable; training sits above it
    "index": {"modeling", "training", "pipelines", "evaluation"},
    "corpus": {"modeling", "index", "training", "pipelines", "hub", "evaluation"},
}


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if parts[0] == PACKAGE and len(parts) > 1 else parts[0]


def test_arrows_point_one_way():
    """applications -> library; training -> index -> modeling (DESIGN.md): the rooms below never import the ones
    named, lazily or not (`faiss`: the third-party package)."""
    found = []
    for module in MODULES:
        room = _room(module)
        for source, _, _ in _imports(module):
            target = _room(source)
            if target == room or not (source.startswith(PACKAGE) or target == "faiss"):
                continue
            if (room not in APPLICATIONS and target in APPLICATIONS) or target in FORBIDDEN.get(room, ()):
                found.append(f"{module} -> {source}")
    assert sorted(set(found)) == []
