"""Assembly: Scene → System (coordinate layout, constraint rows, force laws)."""

from __future__ import annotations

import warnings

import numpy as np
import scipy.linalg as sla

from mbvi.bodies import RigidBody
from mbvi.errors import RedundantConstraintWarning
from mbvi.forces import Damper, Gravity, Spring
from mbvi.geometry import BeamGeometry, BodyGeometry, LinkGeometry, SceneGeometry, vec3
from mbvi.joints import Row
from mbvi.kernels import BilinearRows
from mbvi.layout import Layout
from mbvi.plugins import force_law_for
from mbvi.scene import Scene
from mbvi.system import System

__all__ = ["assemble", "geometry"]

RANK_CHECK_MAX = 6000


def _orthonormality_rows(layout: Layout, body: RigidBody) -> list[Row]:
    o = layout.offset[body.name]
    rows = []
    for i in range(3):
        for j in range(i, 3):
            rows.append(
                Row(
                    [(o + 3 + 3 * i, 1.0)],
                    np.zeros(3),
                    [(o + 3 + 3 * j, 1.0)],
                    np.zeros(3),
                    1.0,
                    1.0 if i == j else 0.0,
                    1.0,
                    f"RigidBody {body.name!r}",
                    "rotation",
                )
            )
    return rows


def _independent_rows(rows: BilinearRows, q: np.ndarray, owners: list[str]) -> np.ndarray:
    """Indices of a maximal independent subset of constraint rows (rank-revealing QR)."""
    G = rows.pattern.tocsr(rows.jacobian_data(q)).toarray() / rows.scale[:, None]
    if G.shape[0] == 0:
        return np.arange(0)
    _, R, piv = sla.qr(G.T, mode="economic", pivoting=True)
    d = np.abs(np.diag(R))
    tol = max(G.shape) * np.finfo(float).eps * 1e3 * (d[0] if len(d) else 1.0)
    rank = int(np.sum(d > tol))
    keep = np.sort(piv[:rank])
    if rank < G.shape[0]:
        dropped = sorted(set(range(G.shape[0])) - set(keep.tolist()))
        names = sorted({owners[i] for i in dropped})
        warnings.warn(
            f"{len(dropped)} of {G.shape[0]} constraint equations are redundant (rank {rank}) and are "
            f"dropped from the solves: {', '.join(names)}. This is normal for closed planar loops "
            "built from spatial joints; the dropped equations stay satisfied.",
            RedundantConstraintWarning,
            stacklevel=3,
        )
    return keep


def geometry(scene: Scene, layout: Layout) -> SceneGeometry:
    """The typed, read-only description of the assembled scene (what trajectories store and rendering draws).

    Reads the scene and the layout; writes nothing onto either.
    """
    bodies = []
    for b in scene.bodies:
        if isinstance(b, RigidBody):
            bodies.append(
                BodyGeometry(
                    b.name,
                    "rigid",
                    float(b.mass),
                    int(layout.offset[b.name]),
                    shape=b.shape.describe() if b.shape is not None else None,
                    principal_axes=tuple(vec3(row) for row in b.principal_axes),  # type: ignore[arg-type]
                    inertia=vec3(b.principal_inertia),
                )
            )
        else:
            bodies.append(BodyGeometry(b.name, layout.kind(b.name), float(b.mass), int(layout.offset[b.name])))
    links = [layout.joint_frames[j.name] for j in scene.joints]
    for f in scene.forces:
        if isinstance(f, Damper) or (isinstance(f, Spring) and not f.internal):
            kind = "spring" if isinstance(f, Spring) else "damper"
            links.append(LinkGeometry(kind, f.name, f.a, f.b, vec3(f.anchor_a), vec3(f.anchor_b)))
    beams = [
        BeamGeometry(beam.name, tuple(beam.nodes), (float(beam.segment_length),) * beam.segments)
        for beam in scene.beams.values()
    ]
    return SceneGeometry.of(bodies, links, beams, layout.length_scale, scene.gravity)


def assemble(scene: Scene) -> System:
    """Assemble a scene into a :class:`mbvi.System`.

    Raises
    ------
    ValueError
        When initial positions violate a joint (naming it), or an element is inconsistent.
    """
    layout = Layout(scene.bodies)
    rows: list[Row] = []
    for b in scene.bodies:
        if isinstance(b, RigidBody):
            rows += _orthonormality_rows(layout, b)
    layout.joints = {j.name: j for j in scene.joints}
    layout.joint_frames = {j.name: j.describe(layout) for j in scene.joints}
    for j in scene.joints:
        rows += j.constraint_rows(layout)
    brows = BilinearRows(rows, layout.nq)
    if brows.n:
        g0 = brows.values(layout.q0)
        rel = np.abs(g0) / brows.scale
        worst = int(np.argmax(rel))
        if rel[worst] > 1e-8:
            raise ValueError(f"{brows.owner[worst]}: initial positions violate the joint (residual {g0[worst]:.3g})")
    active = np.arange(brows.n)
    if brows.n and scene.has_loops() and brows.n <= RANK_CHECK_MAX:
        active = _independent_rows(brows, layout.q0, brows.owner)
    elements = list(scene.forces)
    if np.any(scene.gravity != 0):
        elements.insert(0, Gravity(scene.gravity))
    by_law: dict[type, list] = {}
    for e in elements:
        by_law.setdefault(force_law_for(type(e)), []).append(e)
    laws = [law(items, layout) for law, items in by_law.items()]
    return System(layout, brows, active, laws, geometry(scene, layout))
