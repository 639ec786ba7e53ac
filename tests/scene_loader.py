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


def verlet_drifts(
    system: mbvi.System, start: mbvi.State, nsteps: int, *, tol: float = 1e-12, by_impulse: bool = True
) -> tuple[int, int]:
    """Constrained drifts and factorizations of A in ``nsteps`` compiled Lie-loop verlet steps (dt = 1e-3) from
    ``start``, the warm start's order chosen by the last step's impulse M⁻¹GᵀΛ (as the loop does) or by Λ.
    Asserts that every step succeeds and that the joints hold to ``tol`` at the end."""
    import numpy as np

    from mbvi.engine import kernels as K
    from mbvi.engine import lieloop as LIE
    from mbvi.engine import loop
    from mbvi.engine import model as MODEL
    from mbvi.engine.fields import ST, WARM_ROWS, WK, M

    I, F, Iv, Fv, IL, FL = MODEL.build(system)
    WI, WS = loop.workspace(Iv)
    bufs = LIE.lie_buffers(I, Iv, IL)
    q, u = start.q.copy(), np.zeros(Iv[M.NQ])
    LIE.to_u(IL, q, start.v, u)
    LIE.lie_prepare(I, F, IL, WI, bufs, q, u)
    lam = np.zeros((WARM_ROWS, I[M.N]))
    h, ls = 1e-3, float(system.length_scale)
    for _ in range(nsteps):
        if by_impulse:
            LIE._warm_start(I, WI, bufs, 0, lam)
        else:
            K.extrapolate_warm_start(I, 0, lam)
        status = LIE._substep(I, F, Iv, Fv, IL, FL, WI, WS, bufs, q, u, h, 0.5 * h, 0.5 * h, lam[0], tol, 50, ls)
        assert status == ST.DONE
    assert system.residual(system.active_constraints(q)) <= tol  # the joints held
    return int(WI[WK.DRIFTS]), int(WI[WK.REFACTORED])
