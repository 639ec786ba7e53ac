"""Load the example scenes in ``scenes/`` as modules (they are files, not a package)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

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
