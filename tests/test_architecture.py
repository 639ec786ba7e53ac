"""The layering of the package: no import cycle, no arrow back up the layers, no private name across packages.

Objects gather arrays, the core runs, values come back: the compiled engine (``mbvi.engine``) imports nothing of
mbvi outside itself, the model (scenes, bodies, joints) knows no integrator, and so on up to the command line.
Every import counts — at module level, inside functions, under ``TYPE_CHECKING`` and through
``importlib.import_module("…")`` — as the seams review counts them. A new module must be given its layer here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "mbvi"

#: layers from the bottom up; a module belongs to the longest prefix listed (a package's prefix covers its modules)
LAYERS: list[tuple[str, ...]] = [
    # 0: foundations every layer may use
    (
        "mbvi._validate",
        "mbvi._version",
        "mbvi.errors",
        "mbvi.notices",
        "mbvi.interrupts",
        "mbvi.state",
        "mbvi.geometry",
        "mbvi.hookspecs",
        "mbvi.runs",
        "mbvi.scenefile",
        "mbvi.checks",
    ),
    # 1: the compiled core: arrays in, values out
    ("mbvi.engine",),
    # 2: numerics on arrays
    ("mbvi.kernels", "mbvi.linalg", "mbvi.kinematics"),
    # 3: the model a user builds
    (
        "mbvi.shapes",
        "mbvi.bodies",
        "mbvi.forces",
        "mbvi.layout",
        "mbvi.joints",
        "mbvi.loads",
        "mbvi.loadkernels",
        "mbvi.urdf",
        "mbvi.scene",
    ),
    # 4: force laws and the assembled system
    ("mbvi.forcelaws", "mbvi.lawmethods", "mbvi.beam", "mbvi.system", "mbvi.reactions"),
    # 5: integrators (scenes' and Lagrangian systems'), and why a step failed
    ("mbvi.diagnosis", "mbvi.integrators", "mbvi.lagrangian"),
    # 6: the registry and assembly
    ("mbvi.plugins", "mbvi.assembly"),
    # 7: results
    ("mbvi.trajectory",),
    # 8: what users call
    (
        "mbvi.simulate",
        "mbvi.simulator",
        "mbvi.batch",
        "mbvi.statics",
        "mbvi.sweep",
        "mbvi.lagrangian.run",
        "mbvi.lagrangian.statics",
    ),
    # 9: pictures, the command line, the package's face
    ("mbvi.plot", "mbvi.render", "mbvi.lagrangian.picture", "mbvi.precompile", "mbvi.cli", "mbvi.__main__", "mbvi"),
]


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        name = ".".join(("mbvi", *path.relative_to(ROOT).with_suffix("").parts))
        out[name.removesuffix(".__init__")] = path
    return out


def _imports() -> tuple[dict[str, set[str]], list[tuple[str, str, str]]]:
    """Every module's imports of mbvi modules, and the private names taken from another package."""
    mods = _modules()
    edges: dict[str, set[str]] = {}
    private = []
    for mod, path in mods.items():
        is_pkg = path.name == "__init__.py"
        out = edges.setdefault(mod, set())
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[tuple[str, list[str]]] = []
            if isinstance(node, ast.Import):
                targets = [(a.name, []) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    src = ".".join(base + ([node.module] if node.module else []))
                else:
                    src = node.module or ""
                targets = [(src, [a.name for a in node.names])]
            elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == (
                "import_module"
            ):
                if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                    targets = [(node.args[0].value, [])]
            for src, names in targets:
                if src != "mbvi" and not src.startswith("mbvi."):
                    continue
                for n in names or [None]:
                    full = f"{src}.{n}" if n else src
                    tgt = full if full in mods else src if src in mods else None
                    if tgt and tgt != mod:
                        out.add(tgt)
                    owner = tgt.rsplit(".", 1)[0] if tgt else None
                    if n and n.startswith("_") and not n.startswith("__") and owner != mod.rsplit(".", 1)[0]:
                        private.append((mod, src, n))
    return edges, private


def _layer(mod: str) -> int:
    best, rank = -1, -1
    for i, prefixes in enumerate(LAYERS):
        for p in prefixes:
            if (mod == p or mod.startswith(p + ".")) and len(p) > best:
                best, rank = len(p), i
    return rank


def test_every_module_has_a_layer() -> None:
    assert [m for m in _modules() if _layer(m) < 0] == []


def test_no_import_cycle() -> None:
    edges, _ = _imports()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
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
                cycles.append(sorted(comp))

    for v in list(edges):
        if v not in index:
            visit(v)
    assert cycles == []


def test_no_import_points_up_the_layers() -> None:
    edges, _ = _imports()
    up = [(a, b) for a, targets in edges.items() for b in targets if _layer(b) > _layer(a)]
    assert up == [], "imports from a lower layer to a higher one: " + ", ".join(f"{a} → {b}" for a, b in up)


def test_no_private_name_is_taken_from_another_package() -> None:
    _, private = _imports()
    assert private == []


def test_the_compiled_core_imports_nothing_of_mbvi_outside_itself() -> None:
    edges, _ = _imports()
    outside = {
        (a, b) for a, t in edges.items() if a.startswith("mbvi.engine") for b in t if not b.startswith("mbvi.engine")
    }
    assert outside == set()


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from mbvi.system import System", "up"),  # the core reaching up
        ("from mbvi.integrators.rattle import _helper", "private"),
    ],
)
def test_the_checks_catch_what_they_guard(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source, expected) -> None:
    """A module of the engine that imported System, or a private name of another package, is caught."""
    fake = tmp_path / "mbvi"
    for path in ROOT.rglob("*.py"):
        target = fake / path.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    (fake / "engine" / "intruder.py").write_text(source + "\n", encoding="utf-8")
    monkeypatch.setattr(__import__(__name__), "ROOT", fake)
    edges, private = _imports()
    if expected == "up":
        assert ("mbvi.engine.intruder", "mbvi.system") in {(a, b) for a, t in edges.items() for b in t}
        assert _layer("mbvi.system") > _layer("mbvi.engine.intruder")
    else:
        assert ("mbvi.engine.intruder", "mbvi.integrators.rattle", "_helper") in private


def test_no_public_name_takes_a_private_parameter() -> None:
    """What ``mbvi`` exports shows no parameter of its own internals in its signature (the API page and ``help``
    read it): ``simulate`` showed ``_verify``, the switch of its own step-size re-runs."""
    import inspect

    import mbvi

    private = []
    for name in mbvi.__all__:
        obj = getattr(mbvi, name)
        if inspect.isclass(obj):
            functions = [obj.__init__] + [f for n, f in inspect.getmembers(obj, inspect.isfunction) if n[0] != "_"]
        else:
            functions = [obj] if inspect.isfunction(obj) else []
        for fn in functions:
            try:
                params = inspect.signature(fn).parameters
            except (TypeError, ValueError):  # (a builtin's slot wrapper)
                continue
            private += [f"{name}: {fn.__name__}({p})" for p in params if p.startswith("_")]
    assert private == []
