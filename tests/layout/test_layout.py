"""The house's rules, checked on the source: no module imports itself round a circle, imports between
the rooms of `mle_gym/` point down the README's Layout list (with the few exceptions listed here,
each with its reason), and nothing sits loose at the package's top but its own modules.

Only imports made when a module loads count (a module's top level, including `try` and `if` blocks,
but not `if TYPE_CHECKING` or `if __name__ == "__main__"`); an import inside a function runs when it is
called and cannot make a loading circle.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "mle_gym"
# The README's Layout, top to bottom: a room may import the rooms below it, never those above.
ORDER = ("cli", "integrations", "runs", "pools", "records", "envs", "tools", "sandbox")
# The package's own modules, importable from anywhere.
OWN = ("__init__", "config", "errors", "registry", "units")
# Upward imports that are meant, each with its reason (the README's Layout says the same).
EXCEPTIONS = {
    ("records", "runs"): "the viewer and the MLE-bench export (records/) show run rates (runs.rates); "
                         "runs.rates reads records.audit's flags, and no module circle comes of it",
}


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _load_time_imports(path: Path, name: str, modules: dict[str, Path]) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")
                    anchor = anchor[: len(anchor) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    targets.add(full if full in modules else base)
            elif isinstance(node, (ast.If, ast.Try)):
                if isinstance(node, ast.If) and ("TYPE_CHECKING" in ast.unparse(node.test)
                                                 or "__main__" in ast.unparse(node.test)):
                    continue  # for type checkers only, or when run as a script
                visit(node.body)
                visit(getattr(node, "orelse", []))
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)
                visit(getattr(node, "finalbody", []))

    visit(tree.body)
    resolved = set()
    for target in targets:
        while target and target not in modules:
            target = target.rpartition(".")[0]
        if target and target != name:
            resolved.add(target)
    return resolved


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _load_time_imports(path, name, modules) for name, path in modules.items()}


def _room(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in ORDER else None


def test_no_module_imports_itself_round_a_circle() -> None:
    graph = _graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    counter = [0]

    def strongconnect(v: str) -> None:  # Tarjan's algorithm, iterative enough for this depth
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                strongconnect(w)
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
                circles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            strongconnect(v)
    assert circles == [], f"modules that import each other when they load: {circles}"


def test_rooms_import_down_the_layout_list() -> None:
    upward = []
    for module, targets in _graph().items():
        here = _room(module)
        for target in targets:
            there = _room(target)
            if here is None or there is None or here == there:
                continue
            if ORDER.index(there) < ORDER.index(here) and (here, there) not in EXCEPTIONS:
                upward.append(f"{module} -> {target}")
    assert upward == [], "imports that point up the README's Layout list:\n" + "\n".join(sorted(upward))


def test_nothing_sits_loose_at_the_top_but_the_packages_own() -> None:
    loose = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem not in OWN)
    assert loose == []
    rooms = sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    assert set(ORDER) <= set(rooms), rooms


def test_every_room_says_what_lives_there() -> None:
    for room in ORDER:
        doc = ast.get_docstring(ast.parse((PACKAGE / room / "__init__.py").read_text(encoding="utf-8")))
        assert doc and len(doc.splitlines()[0]) > 20, f"mle_gym/{room}/__init__.py needs a docstring"
