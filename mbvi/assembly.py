"""Assembly: Scene → System (coordinate layout, constraint rows, force laws)."""

from __future__ import annotations

import warnings

import numpy as np
import scipy.linalg as sla

from mbvi.bodies import RigidBody
from mbvi.errors import RedundantConstraintWarning
from mbvi.forces import Gravity
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


def geometry(scene: Scene, layout: Layout) -> dict:
    """The JSON-serializable description that trajectories and rendering use."""
    bodies = []
    for b in scene.bodies:
        entry = {
            "name": b.name,
            "kind": layout.kind(b.name),
            "mass": float(b.mass),
            "offset": int(layout.offset[b.name]),
            "shape": None,
        }
        if isinstance(b, RigidBody):
            entry["shape"] = b.shape.describe() if b.shape is not None else None
            entry["principal_axes"] = b.principal_axes.tolist()
            entry["inertia"] = b.principal_inertia.tolist()
        bodies.append(entry)
    links = [j.describe(layout) for j in scene.joints]
    from mbvi.forces import Damper, Spring

    for f in scene.forces:
        if isinstance(f, (Spring, Damper)) and not getattr(f, "internal", False):
            links.append(
                {
                    "type": "spring" if isinstance(f, Spring) else "damper",
                    "name": f.name,
                    "a": f.a,
                    "b": f.b,
                    "anchor_a": f.anchor_a.tolist(),
                    "anchor_b": f.anchor_b.tolist(),
                    "axis": None,
                }
            )
    beams = [beam.describe() for beam in scene.beams.values()]
    return {
        "bodies": bodies,
        "links": links,
        "beams": beams,
        "length_scale": float(layout.length_scale),
        "gravity": scene.gravity.tolist(),
    }


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
    for j in scene.joints:
        rows += j.constraint_rows(layout)
    layout.joints = {j.name: j for j in scene.joints}
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
