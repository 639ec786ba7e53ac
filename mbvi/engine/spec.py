"""What the engine is built from: public, typed arrays (the only way a model is made).

Objects gather arrays, the core runs, values come back (poliastro's ``core``,
diffrax's explicit solver state). :func:`mbvi.engine.model.build` reads a
:class:`ModelSpec` and nothing else: it never sees a ``System``, a scene, a
body or a force-law class. The assembled system fills one in
(:meth:`mbvi.System.engine_spec`):

* :class:`RowTerms` — constraint rows g_r = s_r U_r(q)·W_r(q) − k_r as lists of
  affine terms, with where each term lands in G's sparsity pattern;
* :class:`Pattern` — G's pattern, the inverse mass of the coordinates it acts
  on and the entry pairs that make A = G M⁻¹ Gᵀ (:func:`entry_pairs`): the
  factorization plan;
* :class:`Bodies` — where each body's coordinates are, and the rigid bodies'
  principal moments (for the rotation update on SO(3), :mod:`mbvi.engine.lie`);
* one :class:`mbvi.engine.kernel.LawKernels` per force law (its compiled form).

This module is numba-free.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["ROW_JOINT", "ROW_ROTATION", "Bodies", "ModelSpec", "Pattern", "RowTerms", "entry_pairs"]

#: kinds of constraint row: a joint's, or a rigid body's orthonormality of its rotation columns
ROW_JOINT, ROW_ROTATION = 0, 1


@dataclass(frozen=True)
class RowTerms:
    """Constraint rows as affine terms: ``g_r = s_r (U_r · W_r) − k_r`` (rows renumbered 0 … n−1).

    Attributes
    ----------
    ur, uc, uv : ndarray, (nu,)
        U terms: component 3 r + c of the stacked U, the coordinate, the weight.
    su : ndarray, (nu,)
        s_r times the weight (twice that when ``same``): the term's coefficient in G.
    upos : ndarray, (nu,)
        The entry of the pattern each U term adds to.
    wr, wc, wv, sw, wpos : ndarray, (nw,)
        The same for W (the U arrays when ``same``).
    same : bool
        Every row's W map is its U map.
    cu, cw : ndarray, (3n,)
        Constant parts of U and W, m.
    s, k, scale, roundoff : ndarray, (n,)
        Row factor and constant; natural size (m or 1); round-off at the initial configuration.
    kind : ndarray of int, (n,)
        :data:`ROW_JOINT` or :data:`ROW_ROTATION`.
    """

    ur: np.ndarray
    uc: np.ndarray
    uv: np.ndarray
    su: np.ndarray
    upos: np.ndarray
    wr: np.ndarray
    wc: np.ndarray
    wv: np.ndarray
    sw: np.ndarray
    wpos: np.ndarray
    same: bool
    cu: np.ndarray
    cw: np.ndarray
    s: np.ndarray
    k: np.ndarray
    scale: np.ndarray
    roundoff: np.ndarray
    kind: np.ndarray

    @property
    def n(self) -> int:
        """Number of rows."""
        return len(self.s)


@dataclass(frozen=True)
class Pattern:
    """G's sparsity pattern in some coordinates, with the factorization plan of A = G M⁻¹ Gᵀ.

    Attributes
    ----------
    nq : int
        Coordinates (columns of G).
    rows, cols : ndarray of int, (nnz,)
        The entries of G.
    inv_mass : ndarray, (nq,)
        M⁻¹ (diagonal).
    pa, pb : ndarray of int
        Entry pairs (a, b) of G sharing a column: A[row a, row b] += G_a G_b M⁻¹_col.
    aw : ndarray
        M⁻¹ of each pair's column.
    """

    nq: int
    rows: np.ndarray
    cols: np.ndarray
    inv_mass: np.ndarray
    pa: np.ndarray
    pb: np.ndarray
    aw: np.ndarray

    @classmethod
    def of(cls, rows: np.ndarray, cols: np.ndarray, nq: int, inv_mass: np.ndarray) -> Pattern:
        """The pattern with its pairs (:func:`entry_pairs`)."""
        pa, pb, aw = entry_pairs(rows, cols, inv_mass)
        return cls(int(nq), np.asarray(rows), np.asarray(cols), np.asarray(inv_mass, float), pa, pb, aw)


def entry_pairs(rows: np.ndarray, cols: np.ndarray, inv_mass: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every ordered pair (a, b) of G's entries in one column, and that column's inverse mass.

    A = G M⁻¹ Gᵀ is Σ over the pairs of G_a G_b M⁻¹_col at (row a, row b). The
    pairs come column by column (a stable order of the entries), a before b in
    the entry order within a column; the engine sums each entry of A's pairs in
    this order.
    """
    rows, cols = np.asarray(rows), np.asarray(cols)
    order = np.argsort(cols, kind="stable")
    sc = cols[order]
    starts = np.searchsorted(sc, sc, side="left")
    ends = np.searchsorted(sc, sc, side="right")
    cnt = ends - starts
    e_rep = np.repeat(np.arange(len(sc)), cnt)
    offs = np.arange(int(cnt.sum())) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    f = starts[e_rep] + offs
    pa, pb = order[e_rep], order[f]
    return pa, pb, np.asarray(inv_mass)[cols[pa]]


@dataclass(frozen=True)
class Bodies:
    """Where each body's coordinates are (in the layout's order).

    Attributes
    ----------
    offset : ndarray of int, (bodies,)
        Each body's first coordinate in q.
    rigid : ndarray of bool, (bodies,)
        Rigid bodies (12 coordinates: centre, then the three rotation columns) versus particles (3).
    mass : ndarray, (bodies,)
        Masses, kg.
    moments : ndarray, (bodies, 3)
        Principal moments of inertia J (zero for particles), kg m².
    """

    offset: np.ndarray
    rigid: np.ndarray
    mass: np.ndarray
    moments: np.ndarray


@dataclass(frozen=True)
class ModelSpec:
    """Everything :func:`mbvi.engine.model.build` reads.

    Attributes
    ----------
    nq : int
        Coordinates.
    rows : RowTerms
        The active constraint rows.
    pattern : Pattern
        Their Jacobian's pattern in q, with the factorization plan.
    bodies : Bodies
        The bodies (their rigid ones step on SO(3): the model then uses the joint rows only).
    laws : list
        One :class:`mbvi.engine.kernel.LawKernels` per force law, or None for a law the engine cannot run.
    law_names : list of str
        The laws' names, for messages.
    has_forces, has_velocity_forces : bool
        Some law has a non-conservative force; some such force reads the velocity.
    joint_rows, joint_pattern : RowTerms, Pattern or None
        The joint rows alone and their pattern (systems with rigid bodies).
    """

    nq: int
    rows: RowTerms
    pattern: Pattern
    bodies: Bodies
    laws: list
    law_names: list[str] = field(default_factory=list)
    has_forces: bool = False
    has_velocity_forces: bool = False
    joint_rows: RowTerms | None = None
    joint_pattern: Pattern | None = None
