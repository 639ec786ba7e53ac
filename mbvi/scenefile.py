"""Scene files: a Python module with ``build(**params)``, imported by path (the one loader for the command line,
sweeps, the scenes that build on one another and the tests)."""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

__all__ = ["SceneFileError", "load_scene_module"]


class SceneFileError(ValueError):
    """A scene file that cannot be imported or defines no ``build``."""


def load_scene_module(path: str | Path) -> ModuleType:
    """Import a scene file by path.

    The module is registered in ``sys.modules`` under a name derived from the file's
    absolute path (functions it defines pickle by that name, for Dask's workers). Each call runs
    the file afresh, so an edited file is read again, and its module-level code runs every time.

    Parameters
    ----------
    path : str or Path
        A ``.py`` file defining ``build(**params)``.

    Returns
    -------
    module
        The imported module.

    Raises
    ------
    FileNotFoundError
        If ``path`` is not a file.
    SceneFileError
        If it cannot be imported or defines no callable ``build``.
    """
    file = Path(path)
    if file.is_dir():
        raise FileNotFoundError(f"{str(path)!r} is a directory, not a scene file (a .py module with build())")
    if not file.is_file():
        raise FileNotFoundError(f"scene file not found: {str(path)!r}")
    # a name the same in every process (hash() of a str is not): a callable of the file keeps its compiled kernel,
    # whose cache key holds its module's name (each `mbvi run` compiled it again, and left one more on disk)
    name = "_mbvi_scene_" + hashlib.sha1(str(file.resolve()).encode()).hexdigest()[:16]
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise SceneFileError(f"cannot import scene file {str(path)!r} (is it a .py file?)")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    # its own directory first on the path, as ``python scene.py`` puts it: a params.py or helpers.py beside it
    # imports (and stays importable by build, which may import it later)
    home = str(file.resolve().parent)
    if home not in sys.path:
        sys.path.insert(0, home)
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:  # a sys.exit() in the file too: not a silent exit of mbvi
        sys.modules.pop(name, None)
        raise SceneFileError(f"cannot import scene file {str(path)!r}: {type(exc).__name__}: {exc}") from exc
    if not callable(getattr(module, "build", None)):
        raise SceneFileError(f"scene file {str(path)!r} defines no build(**params) function")
    return module
