"""The package's import graph: no circle, no private name used across modules, arrows one way.

Every ``import`` in seqlab counts, at module level or inside a function (a function-level import is a
dependency too, only a later one); those under ``if TYPE_CHECKING:`` count as well. Importing
``seqlab.a.b`` from outside ``seqlab.a`` runs ``seqlab/a/__init__.py`` first, so it is an arrow to the
package as well. ``python tests/test_layout.py`` prints the graph's report.
"""

from __future__ import annotations

import ast
import functools
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "seqlab"

#: Old import paths kept as re-export shims for one release: library code never imports them.
SHIM_MARK = "Deprecated import path"

#: Packages and modules by layer, lowest first: a module imports from its own layer and lower ones only. A name
#: stands for the module and everything under it, the longest name deciding.
LAYERS = [
    {"seqlab.errors", "seqlab.version", "seqlab.io"},
    {"seqlab.data", "seqlab.registry", "seqlab.runtime.blas", "seqlab.runtime.heap"},
    {"seqlab.nn", "seqlab.crf"},
    {"seqlab.features"},
    {"seqlab.encoders"},
    {"seqlab.decoders"},
    {"seqlab.config", "seqlab.data.corpus"},  # the corpus a config names
    {"seqlab.evaluation"},
    {"seqlab.runtime"},
    {"seqlab.tagging"},
    {"seqlab.tagger"},
    {"seqlab.training", "seqlab.serving", "seqlab.integrations"},
    {"seqlab.cli", "seqlab.__main__"},
]
#: Above every layer: the package itself (``import seqlab``), which nothing in it imports.
TOP = "seqlab"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def is_package(name: str, known: dict[str, Path]) -> bool:
    return name in known and known[name].name == "__init__.py"


def is_shim(path: Path) -> bool:
    doc = ast.get_docstring(parsed(path)) or ""
    return doc.startswith(SHIM_MARK)


@functools.cache
def parsed(path: Path) -> ast.Module:
    """The syntax tree of ``path``, parsed once per session (the package's files do not change under the tests)."""
    return ast.parse(path.read_text(encoding="utf-8"))


def imports(name: str, path: Path, known: dict[str, Path]):
    """(line, target module, imported names or None, explicit) for each seqlab import in ``path``."""
    tree = parsed(path)
    package = name if is_package(name, known) else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "seqlab":
                    yield node.lineno, alias.name, None
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if source.split(".")[0] != "seqlab":
                continue
            names = []
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                if sub in known:
                    yield node.lineno, sub, None  # a submodule
                else:
                    names.append(alias.name)
            if names:
                yield node.lineno, source, names


def graph(known: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the seqlab modules importing it runs (explicit targets and the packages above them that the
    importer is not inside)."""
    edges: dict[str, set[str]] = {m: set() for m in known}
    for name, path in known.items():
        own = {".".join(name.split(".")[:k]) for k in range(1, name.count(".") + 2)}
        for _, target, _ in imports(name, path, known):
            if target not in known:
                continue
            parts = target.split(".")
            above = {".".join(parts[:k]) for k in range(1, len(parts))} - own
            edges[name] |= ({target} | {p for p in above if p in known}) - {name}
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), and nodes importing themselves."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(10_000)

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in edges.get(v, ()):
                out.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def private_uses(known: dict[str, Path]) -> list[str]:
    """``from seqlab.x import _name`` in another module, and ``module._name`` on an imported seqlab module."""
    found = []
    for name, path in known.items():
        tree = parsed(path)
        own = list(imports(name, path, known))  # once per module, not once per import statement
        bound: dict[str, str] = {}  # local name -> seqlab module
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                for lineno, target, names in own:
                    if lineno == node.lineno and names and target != name:
                        found += [
                            f"{name}:{lineno}: {target}.{n}"
                            for n in names
                            if n.startswith("_") and not n.startswith("__")
                        ]
                for alias in node.names:
                    full = f"{node.module}.{alias.name}" if node.module else alias.name
                    if full in known:
                        bound[alias.asname or alias.name] = full
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in known and alias.asname:
                        bound[alias.asname] = alias.name
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in bound
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and bound[node.value.id] != name
            ):
                found.append(f"{name}:{node.lineno}: {bound[node.value.id]}.{node.attr}")
    return sorted(set(found))


def layer_of(name: str) -> int | None:
    if name == TOP:
        return len(LAYERS)
    best = None
    for k, layer in enumerate(LAYERS):
        for prefix in layer:
            inside = name == prefix or name.startswith(prefix + ".")
            if inside and (best is None or len(prefix) > len(best[1])):
                best = (k, prefix)
    return None if best is None else best[0]


def upward(edges: dict[str, set[str]], shims: set[str], known: dict[str, Path]) -> list[str]:
    """Arrows from a lower layer to a higher one (shims excluded: they point at the new homes; so are packages
    whose ``__init__`` imports nothing, such as :mod:`seqlab.runtime`: importing them runs nothing of seqlab's)."""
    out = []
    for source, targets in edges.items():
        if source in shims:
            continue
        for target in targets:
            if is_package(target, known) and not edges.get(target) and target != TOP:
                continue
            a, b = layer_of(source), layer_of(target)
            if a is not None and b is not None and b > a:
                out.append(f"{source} -> {target}")
    return sorted(out)


@functools.cache
def report() -> dict[str, list]:
    """The graph's findings, worked out once for all the tests below (they only read them)."""
    known = modules()
    shims = {m for m, p in known.items() if is_shim(p)}
    edges = graph(known)
    library = {m: e for m, e in edges.items() if m not in shims}
    return {
        "modules": sorted(set(known) - shims),
        "shims": sorted(shims),
        "cycles": cycles(library),
        "private": [p for p in private_uses(known) if p.split(":")[0] not in shims],
        "shim_imports": sorted(f"{m} -> {t}" for m, e in library.items() for t in e if t in shims),
        "upward": upward(edges, shims, known),
        "unlayered": sorted(m for m in set(known) - shims if layer_of(m) is None),
    }


def test_no_import_circle():
    assert report()["cycles"] == []


def test_no_private_name_used_across_modules():
    assert report()["private"] == []


def test_library_code_never_imports_an_old_path():
    assert report()["shim_imports"] == []


def test_arrows_run_one_way():
    found = report()
    assert found["unlayered"] == []
    assert found["upward"] == []


def test_every_package_says_what_it_is_for():
    for init in PACKAGE.rglob("__init__.py"):
        assert ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))), init


def test_old_import_paths_still_import_for_one_release():
    import importlib

    for name in report()["shims"]:
        try:
            shim = importlib.import_module(name)
        except ModuleNotFoundError as err:  # an optional dependency (spaCy for the spaCy component)
            assert not (err.name or "").startswith("seqlab"), err
            continue
        assert shim.__doc__.startswith(SHIM_MARK)
        assert shim.__all__ and all(hasattr(shim, n) for n in shim.__all__), name


if __name__ == "__main__":
    found = report()
    print(f"{len(found['modules'])} modules, {len(found['shims'])} shims")
    for key in ("cycles", "private", "shim_imports", "upward", "unlayered"):
        print(f"{key}: {len(found[key])}")
        for item in found[key]:
            print("   ", item)
