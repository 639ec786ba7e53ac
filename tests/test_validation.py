"""Issue 11: every failure a clear error — the package namespace, light import and input validation."""

from __future__ import annotations

import subprocess
import sys
import types

import numpy as np
import pytest

import mbvi

HEAVY = ("pyvista", "matplotlib", "sympy", "dask", "xarray", "vtk")


# -- namespace and import ---------------------------------------------------------------------------
def test_namespace_holds_only_public_names_dunders_and_submodules() -> None:
    for name in mbvi.__all__:
        assert getattr(mbvi, name) is not None
    for leak in ("Any", "annotations", "importlib"):
        assert not hasattr(mbvi, leak), f"mbvi.{leak} leaks from mbvi/__init__.py"
    for name in dir(mbvi):
        public = name in mbvi.__all__
        dunder = name.startswith("__") and name.endswith("__")
        submodule = isinstance(getattr(mbvi, name), types.ModuleType)
        assert public or dunder or submodule, f"dir(mbvi) shows {name!r}"
    assert {"render", "plot", "cli"} <= set(dir(mbvi))


def test_public_functions_stay_functions_whatever_imported_their_module_first() -> None:
    code = (
        "import mbvi, mbvi.simulate, mbvi.integrators.base, mbvi.statics\n"
        "assert callable(mbvi.simulate) and callable(mbvi.integrators) and callable(mbvi.equilibrium)\n"
        "assert 'verlet' in mbvi.integrators()\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_import_is_light() -> None:
    code = (
        "import sys, time\n"
        "t0 = time.perf_counter()\n"
        "import mbvi\n"
        "dt = time.perf_counter() - t0\n"
        f"print(dt, [m for m in {HEAVY!r} if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout.split(" ", 1)
    print(f"import mbvi: {float(out[0]):.3f} s")  # measured, not asserted (shared CI machines)
    assert out[1].strip() == "[]", f"import mbvi imports {out[1].strip()}"


def test_first_use_does_not_import_rendering_or_plotting() -> None:
    code = (
        "import sys, mbvi\n"
        "s = mbvi.Scene()\n"
        "s.add(mbvi.Particle('a', mass=1.0, position=(1, 0, 0)))\n"
        "s.add(mbvi.Rod('world', 'a'))\n"
        "mbvi.assemble(s).initial_state()\n"
        "print([m for m in ('pyvista', 'matplotlib', 'sympy', 'dask', 'xarray') if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "[]"
