"""Load the example scenes in ``scenes/`` as modules (they are files, not a package), and the rigid chain the
benchmarks time, built the same way for the tests that need it."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import mbvi

SCENES = Path(__file__).resolve().parents[1] / "scenes"


def load_scene(name_or_path: str | Path) -> ModuleType:
    """Import ``scenes/NAME.py`` (or a path to a scene file) as a fresh module."""
    path = Path(name_or_path)
    if path.suffix != ".py":
        path = SCENES / f"{name_or_path}.py"
    spec = importlib.util.spec_from_file_location(f"scene_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rigid_chain(links: int) -> mbvi.Scene:
    """Solid cylinders (1 kg, 1 m, radius 0.05) on revolute joints, axes y, z, y, …, released horizontal: the
    chain of ``benchmarks/bench_engine.py`` (tests do not import the benchmarks)."""
    s = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    r = 0.05
    inertia = (r**2 / 2, (3 * r**2 + 1.0) / 12, (3 * r**2 + 1.0) / 12)
    parent = "world"
    for i in range(links):
        s.add(mbvi.RigidBody(f"link{i}", mass=1.0, inertia=inertia, position=(i + 0.5, 0.0, 0.0)))
        axis = (0.0, 1.0, 0.0) if i % 2 == 0 else (0.0, 0.0, 1.0)
        s.add(mbvi.Revolute(parent, f"link{i}", anchor=(float(i), 0.0, 0.0), axis=axis))
        parent = f"link{i}"
    return s
