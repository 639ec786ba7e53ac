"""Assembly: Scene → System (coordinate layout, constraint rows, force laws)."""

from __future__ import annotations

import networkx as nx
import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from mbvi import notices
from mbvi.bodies import RigidBody
from mbvi.engine.spec import ROW_ROTATION
from mbvi.errors import RedundantConstraintWarning
from mbvi.forces import Damper, Gravity, Spring
from mbvi.geometry import BeamGeometry, BodyGeometry, LinkGeometry, SceneGeometry, vec3
from mbvi.joints import Row, body_frame_coincidence_rows
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


#: how far the redundancy check moves the mechanism along its kept joints (a fraction of the length scale), and
#: the largest relative residual of the dropped rows after it, per the square of that fraction, for them to count
#: as implied by the kept ones (rows dependent only at the start miss by about the square of the motion)
REDUNDANCY_PROBE = 1e-3
REDUNDANCY_IMPLIED = 1e-3

#: rows from which :func:`_independent_rows` first asks the sparse G Gᵀ whether every row is independent
#: (:func:`_surely_independent`) before the dense rank-revealing QR, whose cost grows as rows² × coordinates:
#: 7 s for a 2000-link chain hung between two points, against 0.05 s sparse
SPARSE_RANK_MIN = 400

#: the smallest eigenvalue of G Gᵀ, relative to a bound on its largest, above which the rows are surely
#: independent: σ_min(G)/σ_max(G) > 1e-5, far above the dense check's rank tolerance (~1e-9 at 2000 rows),
#: and far enough above round-off in G Gᵀ (which squares G's condition number) to be computed from it
SURELY_INDEPENDENT = 1e-10


def _surely_independent(G) -> bool:
    """True when the rows of the sparse G (m × nq) are independent by a wide margin, found in linear time for a
    chain: a sparse LU of G Gᵀ and its smallest eigenvalue by shift-invert Lanczos. False when that cannot
    tell (rows that may be dependent, or G Gᵀ too ill-conditioned to say): the dense check then decides."""
    m, n = G.shape
    if m > n or m < 2:
        return False
    A = (G @ G.T).tocsc()
    bound = float(abs(A).sum(axis=1).max())  # Gershgorin: ≥ the largest eigenvalue
    if not 0.0 < bound < np.inf:
        return False
    try:
        lu = spla.splu(A)
        inverse = spla.LinearOperator((m, m), matvec=lu.solve, dtype=float)
        smallest = spla.eigsh(A, k=1, sigma=0.0, which="LM", OPinv=inverse, tol=1e-6, return_eigenvectors=False)
    except (RuntimeError, spla.ArpackError):  # exactly singular, or Lanczos did not converge: undecided
        return False
    return bool(smallest[0] > SURELY_INDEPENDENT * bound)


def _independent_rows(rows: BilinearRows, q: np.ndarray, owners: list[str],
                      length_scale: float) -> tuple[np.ndarray, str | None]:  # fmt: skip
    """Indices of the constraint rows the solves use: a maximal independent subset (rank-revealing QR) when the
    dependence is the mechanism's own (a closed planar loop of spatial joints), else every row.

    Rows that are dependent at q may be so only there: a chain pulled taut between two fixed points, a
    linkage at a dead point. Dropping them would let the mechanism leave them as soon as it moves. So the
    dependent rows are dropped only when they stay satisfied along a small motion allowed by the kept ones
    (:func:`_implied_residual`); else all rows are kept (the solves then meet a singular G M⁻¹ Gᵀ at q, with
    least-squares multipliers) and the warning says the configuration is singular.

    A large G whose rows are independent by a wide margin is told so by the sparse G Gᵀ
    (:func:`_surely_independent`) without the dense QR.

    Returns the rows kept and the warning to give (None when no row is dependent).
    """
    Gs = rows.pattern.tocsr(rows.jacobian_data(q))
    if Gs.shape[0] == 0:
        return np.arange(0), None
    Gs = sp.diags(1.0 / rows.scale) @ Gs
    if Gs.shape[0] >= SPARSE_RANK_MIN and _surely_independent(Gs):
        return np.arange(Gs.shape[0]), None
    G = Gs.toarray()
    Qf, R, piv = sla.qr(G.T, mode="economic", pivoting=True)
    d = np.abs(np.diag(R))
    tol = max(G.shape) * np.finfo(float).eps * 1e3 * (d[0] if len(d) else 1.0)
    rank = int(np.sum(d > tol))
    if rank == G.shape[0]:
        return np.arange(G.shape[0]), None
    keep = _ordered_choice(G, R, piv, rank, tol, owners, rows.kind != ROW_ROTATION)
    if keep is None:
        keep = np.sort(piv[:rank])
    else:
        Qf, R = sla.qr(G[keep].T, mode="economic")
        piv = keep
    dropped = np.array(sorted(set(range(G.shape[0])) - set(keep.tolist())), dtype=np.int64)
    miss = _implied_residual(rows, q, Qf[:, :rank], R[:rank, :rank], piv[:rank], dropped, length_scale)
    only_here = miss > REDUNDANCY_IMPLIED  # dependent at q only: kept (the solves meet them singular at q alone)
    if only_here.any():
        here = sorted({owners[i] for i in dropped[only_here]})
        singular = (
            f"{int(only_here.sum())} of {G.shape[0]} constraint equations are dependent at the initial "
            f"configuration (rank {rank}) but not near it: {', '.join(here)}{_SINGULAR} (a chain pulled taut, a "
            "linkage at a dead point); they are kept, with least-squares multipliers where they are dependent."
        )
        if only_here.all():
            return np.arange(G.shape[0]), singular
        keep = np.sort(np.concatenate([keep, dropped[only_here]]))
        dropped = dropped[~only_here]
    names = sorted({owners[i] for i in dropped})
    redundant = _redundant_note(len(dropped), G.shape[0], f" (rank {rank})", "", names)
    return keep, (singular + " " if only_here.any() else "") + redundant


#: where a note of :func:`_independent_rows` on rows dependent at the initial configuration only ends its first
#: sentence (:func:`_kept_rows_by_loop` keeps that sentence of each loop's)
_SINGULAR = ". The configuration is singular"


def _redundant_note(count: int, total: int, rank: str, where: str, names: list[str]) -> str:
    """The warning's sentence on ``count`` of ``total`` rows dropped as redundant (``rank``: " (rank r)" or "";
    ``where``: ", in k closed loops," or "")."""
    return (
        f"{count} of {total} constraint equations{where} are redundant{rank} and are dropped from the solves: "
        f"{', '.join(names)}. The joints hold the motion without them (a closed planar loop built from spatial "
        "joints, or two joints doing one's work: coaxial hinges, a joint given twice); the dropped equations stay "
        "satisfied (checked along a motion of the mechanism), and carry no reaction: how the load splits between "
        "the joints they were part of is not determined, and the kept ones carry all of it."
    )


def _kept_rows(
    rows: list[Row], brows: BilinearRows, layout: Layout, joints: list
) -> tuple[list[Row], BilinearRows, np.ndarray, str | None]:
    """The rows and their :class:`BilinearRows` (a loop's closing joint's point rows in its body's frame, where
    some were dropped), the indices of those the solves keep (:func:`_independent_rows`) and the warning."""
    active, note = _independent_rows(brows, layout.q0, brows.owner, layout.length_scale)
    turning = _turning_points(rows, active)
    body_rows = _in_body_frames(rows, layout, joints, turning) if turning else None
    if body_rows is not None:  # a loop's closing joint keeps point rows its bodies carry, not the world's
        rows, brows = body_rows, BilinearRows(body_rows, layout.nq)
        active, note = _independent_rows(brows, layout.q0, brows.owner, layout.length_scale)
    return rows, brows, active, note


def _loops(scene: Scene) -> list[list]:
    """The joints of each block of the joint graph that closes a loop: a biconnected component with a cycle, or
    joints side by side between the same two bodies (the world one node)."""
    graph = nx.Graph()
    side_by_side: dict[frozenset, list] = {}
    for j in scene.joints:
        graph.add_edge(j.a, j.b)
        side_by_side.setdefault(frozenset((j.a, j.b)), []).append(j)
    out = []
    for edges in nx.biconnected_component_edges(graph):
        pairs = {frozenset(e) for e in edges}
        joints = [j for pair in pairs for j in side_by_side[pair]]
        if len(pairs) > 1 or len(joints) > 1:
            out.append(joints)
    return out


def _kept_rows_by_loop(rows: list[Row], layout: Layout, scene: Scene) -> tuple[list[Row], np.ndarray, str | None]:
    """:func:`_kept_rows` loop by loop (:func:`_loops`; each with its rigid bodies' own rows): a scene of more
    than :data:`RANK_CHECK_MAX` rows kept every row unchecked, and the solves met 380 flaps' redundant hinges as
    one singular 6080-row G M⁻¹ Gᵀ, a dense pseudo-inverse a step (minutes a step). A dependence spans one block
    of the joint graph (blocks meet at one body, whose own rows are in each)."""
    rows = list(rows)
    dropped: set[int] = set()
    notes, loops = [], 0
    for joints in _loops(scene):
        owners = {j.owner for j in joints}
        owners |= {f"RigidBody {b!r}" for j in joints for b in (j.a, j.b) if layout.kind(b) == "rigid"}
        idx = [i for i, r in enumerate(rows) if r.owner in owners]
        if len(idx) > RANK_CHECK_MAX:  # one loop this large (a ring of 700 links) is left unchecked, as it was
            continue
        mine = [rows[i] for i in idx]
        mine, _, kept, note = _kept_rows(mine, BilinearRows(mine, layout.nq), layout, joints)
        for i, r in zip(idx, mine, strict=True):
            rows[i] = r
        gone = sorted(set(range(len(idx))) - set(kept.tolist()))
        dropped |= {idx[k] for k in gone}
        loops += bool(gone)
        if note is not None:
            notes.append(note)
    active = np.array([i for i in range(len(rows)) if i not in dropped], dtype=np.int64)
    if not notes:
        return rows, active, None
    if len(notes) == 1:
        return rows, active, notes[0]
    names = sorted({rows[i].owner for i in dropped})
    singular = [n.split(_SINGULAR)[0] for n in notes if _SINGULAR in n]
    redundant = _redundant_note(len(dropped), len(rows), "", f", in {loops} closed loops,", names)
    return rows, active, (" ".join(singular) + ". " if singular else "") + redundant


def _turning_points(rows: list[Row], active: np.ndarray) -> set[str]:
    """The joints only some of whose point rows were dropped (a loop's closing joint, whose implied direction the
    loop's bodies carry)."""
    kept = np.zeros(len(rows), dtype=bool)
    kept[active] = True
    count: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        if r.part == "point":
            count.setdefault(r.owner, [0, 0])[int(kept[i])] += 1
    return {owner for owner, (dropped, k) in count.items() if dropped and k}


def _in_body_frames(rows: list[Row], layout: Layout, joints: list, turning: set[str]) -> list[Row] | None:
    """``rows`` with the point rows of the ``turning`` joints along one of their rigid bodies' axes
    (:func:`mbvi.joints.body_frame_coincidence_rows`); None when no such joint has a rigid body."""
    new = {j.owner: body_frame_coincidence_rows(layout, j) for j in joints if j.owner in turning}
    new = {owner: r for owner, r in new.items() if r is not None}
    if not new:
        return None
    out, seen = [], dict.fromkeys(new, 0)
    for r in rows:
        if r.part == "point" and r.owner in new:
            out.append(new[r.owner][seen[r.owner]])
            seen[r.owner] += 1
        else:
            out.append(r)
    return out


#: a dependency coefficient this small (relative to the largest of its dependency) is no dependency
DEPENDENCY_COEFFICIENT = 1e-8


def _dependency_groups(R: np.ndarray, piv: np.ndarray, rank: int, owners: list[str],
                       joint: np.ndarray) -> list[np.ndarray]:  # fmt: skip
    """The rows of each set of dependencies, apart: the closed loops (or redundant joints) of a scene.

    With Gᵀ P = Q R (column-pivoted), dependent row ``piv[rank + j]`` is Σᵢ C[i, j] row ``piv[i]``,
    C = R₁₁⁻¹ R₁₂; rows that share such a relation are in one group, with every row of a joint (``joint``:
    a joint's row, not a rotation's) that has a row in it. Every other row is independent of all the rest. A
    group holds the dependent rows of the pivoted choice that are in it.
    """
    C = sla.solve_triangular(R[:rank, :rank], R[:rank, rank:], check_finite=False)
    parent = {}

    def root(a: int) -> int:
        while parent.setdefault(a, a) != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    for j in range(C.shape[1]):
        col = np.abs(C[:, j])
        members = [int(piv[rank + j])] + [int(piv[i]) for i in np.flatnonzero(col > DEPENDENCY_COEFFICIENT * col.max())]
        for m in members[1:]:
            parent[root(m)] = root(members[0])
    first: dict[str, int] = {}  # a joint's rows together
    for r in np.flatnonzero(joint):
        name = owners[r]
        if name in first:
            parent[root(int(r))] = root(first[name])
        else:
            first[name] = int(r)
    groups: dict[int, list[int]] = {}
    for a in list(parent):
        groups.setdefault(root(a), []).append(a)
    dependent = set(piv[rank:].tolist())
    return [np.array(sorted(g), dtype=np.int64) for g in groups.values() if dependent.intersection(g)]


def _ordered_choice(G: np.ndarray, R: np.ndarray, piv: np.ndarray, rank: int, tol: float,
                    owners: list[str], joint: np.ndarray) -> np.ndarray | None:  # fmt: skip
    """The independent rows the solves keep, chosen in the scene's order within each set of dependencies
    (:func:`_dependency_groups`), or None (the pivoted QR's choice then stands).

    In each group, first every joint whose rows the group's other rows imply loses them all (the latest such
    joint first: the second of two coaxial hinges, a ball joint on a hinge's axis, a hinge beside a weld): a
    joint's rows are then implied wherever the mechanism goes. The rest is chosen row by row in the scene's
    order (:func:`_rows_in_order`): the closing joint of a planar loop keeps the point rows its plane does not
    make dependent.
    """
    keep = np.ones(G.shape[0], dtype=bool)
    for group in _dependency_groups(R, piv, rank, owners, joint):
        sub = G[group]
        sub = sub[:, np.flatnonzero(np.any(sub != 0.0, axis=0))]
        need = len(group) - int(np.sum(np.isin(group, piv[rank:])))  # the group's rank
        alive = np.ones(len(group), dtype=bool)
        names = [owners[r] if joint[r] else "" for r in group]  # a rotation's rows are never dropped
        for name in sorted(set(names) - {""}, key=lambda n: -max(i for i, m in enumerate(names) if m == n)):
            mine = np.array([m == name for m in names])
            trial = alive & ~mine
            if trial.any() and _rank(sub[trial], tol) == need:
                alive = trial
        rest = np.flatnonzero(alive)
        chosen = _rows_in_order(sub[rest], need, tol, float(np.abs(R[rank - 1, rank - 1])))
        if chosen is None:
            return None
        keep[group] = False
        keep[group[rest[chosen]]] = True
    return np.flatnonzero(keep)


def _rank(A: np.ndarray, tol: float) -> int:
    """The rank of A's rows (column-pivoted QR, the threshold of the whole Jacobian's)."""
    d = np.abs(np.diag(sla.qr(A.T, mode="r", pivoting=True)[0]))
    return int(np.sum(d > tol))


def _rows_in_order(G: np.ndarray, rank: int, tol: float, smallest: float) -> np.ndarray | None:
    """The ``rank`` independent rows of G (rows scaled to their natural size) chosen in the scene's order: each
    row is kept when it is independent of the rows kept before it. None when that choice is not ``rank`` rows
    or is much worse conditioned at q than the pivoted QR's (whose smallest kept pivot is ``smallest``).

    The order keeps a joint's rows together: a joint whose equations the earlier ones imply loses them all, as
    the second of two coaxial hinges does. A choice by pivot size at the initial configuration alone mixed the
    two hinges' axis and point rows, a mixture that becomes singular a quarter turn on (a flap on two hinges
    failed within seconds); rows implied everywhere stay implied in every configuration.
    """
    n = G.shape[0]
    basis = np.zeros((G.shape[1], 0))
    keep: list[int] = []
    start, worst = 0, np.inf
    while start < n and len(keep) < rank:
        block = G[start:].T.copy()
        for _ in range(2):  # twice: the rows after the kept ones, orthogonal to them to round-off
            block -= basis @ (basis.T @ block)
        Qb, Rb = sla.qr(block, mode="economic")
        d = np.abs(np.diag(Rb))
        dep = int(np.argmax(d <= tol)) if np.any(d <= tol) else len(d)
        keep += range(start, start + dep)
        if dep:
            worst = min(worst, float(np.min(d[:dep])))
        basis = np.hstack([basis, Qb[:, :dep]])
        start += dep + 1  # past the dependent row
    if len(keep) != rank or worst < 1e-3 * smallest:
        return None
    return np.asarray(keep, dtype=np.int64)


def _implied_residual(
    rows: BilinearRows, q: np.ndarray, Qk: np.ndarray, Rk: np.ndarray, kept: np.ndarray, dropped: np.ndarray,
    length_scale: float,
) -> np.ndarray:  # fmt: skip
    """|g/scale| of each of the ``dropped`` rows after a small motion that keeps the ``kept`` rows satisfied,
    relative to the square of the motion's size (in units of ``length_scale``); zeros when nothing can move or
    the motion cannot be brought back onto the kept rows (then the dependence is taken as the mechanism's own).

    The motion is a random direction of the kept rows' tangent space at q, of length
    :data:`REDUNDANCY_PROBE` times ``length_scale`` (a quarter of it, and so on, when the chord steps back onto
    the kept rows, with Gₖ(q)ᵀ = Qk Rk in the order ``kept``, do not converge). Dropped rows implied by the kept
    ones stay at round-off; rows dependent only at q miss by the square of the motion.
    """
    nq = len(q)
    t = np.random.default_rng(12345).standard_normal(nq)
    t -= Qk @ (Qk.T @ t)
    size = float(np.max(np.abs(t)))
    if not size > 1e-12:  # the kept rows hold the mechanism still: nothing can move off the dropped ones
        return np.zeros(len(dropped))
    scale = rows.scale
    step = REDUNDANCY_PROBE
    for _ in range(4):
        x = q + (step * max(length_scale, 1.0) / size) * t
        with np.errstate(all="ignore"):
            for _ in range(12):
                gk = rows.values(x)[kept] / scale[kept]
                if not np.all(np.isfinite(gk)) or float(np.max(np.abs(gk))) < 1e-14:
                    break
                x = x - Qk @ sla.solve_triangular(Rk, gk, trans="T", check_finite=False)
            gd = rows.values(x)[dropped] / scale[dropped]
        if np.all(np.isfinite(gk)) and float(np.max(np.abs(gk))) < 1e-14 and np.all(np.isfinite(gd)):
            return np.abs(gd) / step**2
        step /= 4.0
    return np.zeros(len(dropped))


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
    return SceneGeometry.of(bodies, links, beams, layout.body_spread, scene.gravity)


def assemble(scene: Scene) -> System:
    """Assemble a scene into a :class:`mbvi.System`.

    Raises
    ------
    ValueError
        When initial positions violate a joint (naming it), or an element is inconsistent or was changed past its
        checks after it was added (:meth:`mbvi.Scene.check`).
    """
    scene.check()
    layout = Layout(scene.bodies)
    rows: list[Row] = []
    for b in scene.bodies:
        if isinstance(b, RigidBody):
            rows += _orthonormality_rows(layout, b)
    layout.joints = {j.name: j for j in scene.joints}
    layout.joint_frames = {j.name: j.describe(layout) for j in scene.joints}
    layout.fit_length_scale(layout.joint_frames, scene.forces)
    for j in scene.joints:
        rows += j.constraint_rows(layout)
    brows = BilinearRows(rows, layout.nq)
    if brows.n:
        g0 = brows.values(layout.q0)
        rel = np.abs(g0) / brows.scale
        worst = int(np.argmax(rel))
        if rel[worst] > 1e-8:
            raise ValueError(f"{brows.owner[worst]}: initial positions violate the joint (residual {g0[worst]:.3g})")
    active, note = np.arange(brows.n), None
    if brows.n and scene.has_loops() and brows.n <= RANK_CHECK_MAX:
        rows, brows, active, note = _kept_rows(rows, brows, layout, list(scene.joints))
    elif brows.n and scene.has_loops():  # each loop alone: a dense check of every row grows as n³
        rows, active, note = _kept_rows_by_loop(rows, layout, scene)
        brows = BilinearRows(rows, layout.nq)
    if note is not None:
        notices.warn(note, RedundantConstraintWarning)
    elements = list(scene.forces)
    if np.any(scene.gravity != 0):
        elements.insert(0, Gravity(scene.gravity))
    by_law: dict[type, list] = {}
    for e in elements:
        by_law.setdefault(force_law_for(type(e)), []).append(e)
    laws = [law(items, layout) for law, items in by_law.items()]
    return System(layout, brows, active, laws, geometry(scene, layout))
