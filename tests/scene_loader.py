"""Load the example scenes in ``scenes/`` as modules (they are files, not a package), and the rigid chain the
benchmarks time, built the same way for the tests that need it."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import mbvi
from mbvi.scenefile import load_scene_module

SCENES = Path(__file__).resolve().parents[1] / "scenes"


def load_scene(name_or_path: str | Path) -> ModuleType:
    """Import ``scenes/NAME.py`` (or a path to a scene file) with mbvi's scene-file loader."""
    path = Path(name_or_path)
    if path.suffix != ".py":
        path = SCENES / f"{name_or_path}.py"
    return load_scene_module(path)


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

    from mbvi.engine import kernels as K
    from mbvi.engine import lieloop as LIE
    from mbvi.engine.fields import ST, WK
    from mbvi.engine.runner import RunState
    from mbvi.engine.scheme import VERLET

    model = system.engine_model()
    I, F, Iv, Fv, IL, FL = model.arrays
    rs = RunState(model, VERLET, start.q, start.v)
    q, u, lam, WI, WS, bufs = rs.q, rs.u, rs.lam, rs.WI, rs.WS, rs.bufs
    LIE.to_u(IL, q, start.v, u)
    LIE.lie_prepare(I, F, IL, WI, bufs, q, u)
    h, ls = 1e-3, float(system.length_scale)
    for k in range(nsteps):
        if by_impulse:
            LIE._warm_start(I, WI, bufs, VERLET, lam)
        else:
            K.extrapolate_warm_start(I, VERLET, lam)
        status = LIE._substep(I, F, Iv, Fv, IL, FL, WI, WS, bufs, q, u, k * h, h, 0.5 * h, 0.5 * h, lam[0], tol, 50,
                              ls)  # fmt: skip
        assert status == ST.DONE
    assert system.residual(system.active_constraints(q)) <= tol  # the joints held
    return int(WI[WK.DRIFTS]), int(WI[WK.REFACTORED])
