"""The drawing of the house (DESIGN.md, "The layers"): every import in `src/coplay`,
at the top of a module or inside a function, points down the layers or stays in its
own, and no module reaches itself through its imports."""

import ast
from collections import defaultdict
from pathlib import Path

import coplay

ROOT = Path(coplay.__file__).parent
# Bottom to top; a module may import from its own layer or those below it.
LAYERS = ["core", "envs", "wrappers", "interop", "nets", "lm", "algos", "eval", "scale", "experiment", "cli"]


def _imports() -> dict[str, set[str]]:
    """module -> the coplay modules it imports (`from package import module` names the module)."""
    modules = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    edges: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("coplay"):
                subs = {f"{node.module}.{a.name}" for a in node.names} & modules.keys()
                targets = subs | ({node.module} if len(subs) < len(node.names) else set())
            elif isinstance(node, ast.Import):
                targets = {a.name for a in node.names}
            else:
                continue
            edges[name] |= {t for t in targets if t in modules and t != name}
    return edges


def _layer(module: str) -> int | None:
    parts = module.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS else None


def test_every_import_points_down_the_layers():
    upward = [f"{m} -> {t}" for m, targets in _imports().items() for t in targets
              if _layer(m) is not None and _layer(t) is not None and _layer(t) > _layer(m)]
    assert upward == []


def test_no_module_imports_itself_through_others():
    edges = _imports()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(v: str) -> None:   # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in list(edges):
        if v not in index:
            visit(v)
    assert cycles == []
