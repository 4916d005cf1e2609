"""The package's layout keeps its shape: no import circle, no private name imported from another
module, arrows that point one way (down the room order `LAYERS`, from the applications to the library), no module
loose at the top of the package, no module too long to hold in one's head without a reason.

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


APPLICATIONS = {"cli", "demo"}
"""The applications built on the library's public API (the `realm-hf` command and the demo): the top of the order.
They may import the library and each other (`realm-hf demo` runs the demo, which prints as `realm-hf ask` does); the
library never imports them."""
LAYERS = [
    {"utils"},  # helpers every room uses: lazy exports, options and usage errors, file writing, precision, slicing
    {"configuration"},  # the configs: the only channel into a model
    {"modeling"},  # the models; knows nothing of faiss, the index or training
    {"corpus"},  # articles -> blocks, the block store
    {"data", "index"},  # examples and collators; the index knows models only through an "embed these batches" callable
    {"hub"},  # index bundles, cards and pairing on the Hub
    {"checkpoints"},  # a checkpoint's parts (encoder, retriever, tokenizer, index): folder, subfolder or Hub repo
    {"retrieval"},  # retrieval from a saved model and its index
    {"pipelines"},  # open-domain QA and retrieval-augmented fill-mask
    {"registration"},  # the Auto classes and the pipeline tasks registered with transformers
    {"evaluation"},  # Open-QA evaluation and its metrics
    {"training", "convert"},  # the trainers (which evaluate as they go); transformers-REALM checkpoints -> realm_hf
]
"""The library's rooms (top-level names under realm_hf), lowest first. A module imports only its own room and rooms of
lower layers, lazily or not; two rooms of one layer do not import each other. A new room must be placed here."""
LAYER = {room: depth for depth, rooms in enumerate(LAYERS) for room in rooms}
TOP_LEVEL = {"realm_hf", "realm_hf.configuration", "realm_hf.registration"}
"""The modules loose at the top of the package: the public API (`__init__`), the configs and the registration with
transformers. Everything else lives in a room."""
JUSTIFIED_CLIMBS = {
    ("realm_hf.index.mips", "realm_hf.hub.download"),  # RealmIndex.from_pretrained(repo_id): the Hub bundle
    ("realm_hf.index.mips", "realm_hf.hub.upload"),  # RealmIndex.push_to_hub
}
"""Imports that climb, each lazy and justified in the importing module's docstring ("Why it imports ...")."""
THIRD_PARTY_FORBIDDEN = {"modeling": {"faiss"}}
"""modeling knows nothing of faiss."""
NOT_ABOVE = {"training": {"pipelines"}, "evaluation": {"pipelines"}, "convert": {"pipelines"}}
"""Rooms a higher room may not import all the same: the pipelines are for users (and the applications); the trainers,
the index builder, evaluation and `convert` find a checkpoint's parts in `realm_hf.checkpoints`, below them all."""


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if parts[0] == PACKAGE and len(parts) > 1 else parts[0]


def _climbs(room: str, target: str) -> bool:
    """Whether an import from `room` into `target` (both rooms of realm_hf, or the package itself) breaks the order."""
    if room == target or room == PACKAGE or room in APPLICATIONS:
        return False  # the package's __init__ names the public API lazily; the applications sit on top
    if target in APPLICATIONS or target == PACKAGE:
        return True
    return LAYER[target] >= LAYER[room]


def test_the_pipelines_serve_users_not_the_library():
    """training, evaluation and convert find a checkpoint's parts in `realm_hf.checkpoints`, never through a pipeline
    (the index builder, a training job, once loaded its snapshot through the fill-mask pipeline's model)."""
    found = [
        f"{module} -> {source}"
        for module in MODULES
        for source, _, _ in _imports(module)
        if source.startswith(PACKAGE) and _room(source) in NOT_ABOVE.get(_room(module), ())
    ]
    assert found == []


def test_checkpoint_parts_sit_below_training_and_pipelines():
    assert LAYER["checkpoints"] < LAYER["pipelines"] < LAYER["training"]
    assert LAYER["checkpoints"] > max(LAYER["modeling"], LAYER["index"], LAYER["hub"])
    assert LAYER["checkpoints"] < LAYER["retrieval"]  # load_retriever finds a checkpoint's retriever there


def test_the_layout_test_sees_climbs():
    assert _climbs("index", "hub") and _climbs("modeling", "training") and _climbs("data", "index")
    assert _climbs("training", "cli") and _climbs("pipelines", "demo") and _climbs("utils", PACKAGE)
    assert not _climbs("hub", "index") and not _climbs("training", "evaluation") and not _climbs("cli", "demo")
    assert not _climbs("demo", "cli") and not _climbs("data", "data")


def test_no_module_is_loose_at_the_top():
    top = {module for module in MODULES if module.count(".") == 0 or not _is_package_room(module)}
    assert top == TOP_LEVEL


def _is_package_room(module: str) -> bool:
    """Whether `module` lives in a room (a subpackage of realm_hf), not loose at the top."""
    parts = module.split(".")
    return len(parts) > 2 or (len(parts) == 2 and _is_package(module))


def test_every_room_has_its_place_in_the_order():
    rooms = {_room(module) for module in MODULES if _is_package_room(module)}
    top = {_room(module) for module in TOP_LEVEL} - {PACKAGE}
    assert rooms | top == set(LAYER) | APPLICATIONS


def test_arrows_point_one_way():
    """Down the room order (`LAYERS`), from the applications to the library, lazily or not; `faiss` (the third-party
    package) never in modeling. A climb listed in `JUSTIFIED_CLIMBS` is lazy and its module's docstring says why."""
    found = []
    for module in MODULES:
        room = _room(module)
        docstring = ast.get_docstring(ast.parse(MODULES[module].read_text(encoding="utf-8"))) or ""
        for source, name, lazy in _imports(module):
            if _room(source) in THIRD_PARTY_FORBIDDEN.get(room, ()):
                found.append(f"{module} -> {source}")
            if not source.startswith(PACKAGE):
                continue
            target = f"{source}.{name}" if name and f"{source}.{name}" in MODULES else source
            if not _climbs(room, _room(target)):
                continue
            said = re.search(rf"Why it imports [^:]*\b{re.escape(target)}\b", docstring)
            justified = (module, target) in JUSTIFIED_CLIMBS and lazy and said is not None
            if not justified:
                found.append(f"{module} -> {target}" + ("" if lazy else " (at module level)"))
    assert sorted(set(found)) == []
