"""Methods as data: a step is a table of stages that one compiled step interprets.

Every method the compiled loop runs is a :data:`Scheme`, a float64 array of
shape (stages, 5) whose row s is ``(kind, w, a0, a1, row)``:

* ``kind`` — :data:`RATTLE` (a kick a0·h_s, a constrained drift h_s, a kick
  a1·h_s and the velocity projection, :func:`mbvi.engine.loop._substep`),
  :data:`MIDPOINT` or :data:`IMPLICIT_EULER` (the implicit pair, one stage);
* ``w`` — the stage's step as a fraction of the step, h_s = w h (negative for
  the backward stages of high-order compositions); the stages' w sum to 1;
* ``a0``, ``a1`` — the kicks at the stage's start and end, as fractions of h_s
  (½, ½ for Störmer–Verlet; 1, 0 for symplectic Euler A; 0, 1 for B);
* ``row`` — the row of the run's SHAKE warm starts the stage uses (stages of
  the same step size share one, :func:`warm_rows`).

A composition Φ_h = φ_{w_m h} ∘ … ∘ φ_{w_1 h} of a base method φ is the base's
table repeated with its weights multiplied (:func:`compose`): Yoshida's
triple jump of ``verlet`` is ``compose(VERLET, (γ₁, 1 − 2γ₁, γ₁))``, and any
plugin's :class:`mbvi.Composition` runs through the same compiled step,
serial and batched, with no engine edit. This module is numba-free: schemes
are built in Python and handed to the compiled loop as arrays.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = [
    "IMPLICIT_EULER",
    "MIDPOINT",
    "RATTLE",
    "SYMPLECTIC_EULER_A",
    "SYMPLECTIC_EULER_B",
    "VERLET",
    "compose",
    "is_rattle",
    "stage",
    "triple_jump",
    "warm_rows",
]

#: stage kinds
RATTLE, MIDPOINT, IMPLICIT_EULER = 0, 1, 2
#: most substeps a step of a fast-turning rigid body is split into (:func:`mbvi.engine.lieloop.lie_step_refined`)
MAX_REFINE = 1024
#: columns of a scheme's rows
KIND, WEIGHT, A0, A1, ROW = range(5)


def stage(kind: int, w: float, a0: float, a1: float, row: int = 0) -> np.ndarray:
    """One stage ``(kind, w, a0, a1, row)`` as a (1, 5) scheme."""
    return np.array([[float(kind), float(w), float(a0), float(a1), float(row)]])


#: the RATTLE family's one-stage members
VERLET = stage(RATTLE, 1.0, 0.5, 0.5)
SYMPLECTIC_EULER_A = stage(RATTLE, 1.0, 1.0, 0.0)
SYMPLECTIC_EULER_B = stage(RATTLE, 1.0, 0.0, 1.0)


def triple_jump(order: int) -> tuple[float, float, float]:
    """Weights (γ₁, γ₂, γ₁) of the symmetric triple jump that raises a symmetric method of even ``order`` by two.

    γ₁ = 1/(2 − 2^{1/(order+1)}), γ₂ = 1 − 2γ₁ (Yoshida 1990; Creutz–Gocksch): of ``verlet`` (order 2)
    the fourth-order ``yoshida4``.
    """
    g1 = 1.0 / (2.0 - 2.0 ** (1.0 / (order + 1)))
    return (g1, 1.0 - 2.0 * g1, g1)


def compose(base: np.ndarray, weights: Sequence[float]) -> np.ndarray:
    """The scheme φ_{w_m h} ∘ … ∘ φ_{w_1 h} of ``base`` (applied first with w_1), warm-start rows by step size.

    Each stage of ``base`` is repeated once per weight with its own weight multiplied
    (w_i · 1.0 = w_i exactly for a one-stage base, so a composition of ``verlet`` takes the
    same floating-point steps as written out by hand).
    """
    base = np.asarray(base, dtype=float)
    rows = [np.array([b[KIND], w * b[WEIGHT], b[A0], b[A1], 0.0]) for w in weights for b in base]
    return warm_rows(np.array(rows).reshape(-1, 5))


def warm_rows(scheme: np.ndarray) -> np.ndarray:
    """``scheme`` with each stage's warm-start row set: stages of one step size share a row, in order of appearance.

    The multipliers of a drift scale with its step: stages of equal w are warm starts for one
    another (the outer stages of a triple jump share row 0, its middle stage has row 1).
    """
    out = np.array(scheme, dtype=float)
    seen: dict[float, int] = {}
    for s in range(len(out)):
        out[s, ROW] = seen.setdefault(float(out[s, WEIGHT]), len(seen))
    return out


def is_rattle(scheme: np.ndarray) -> bool:
    """Whether every stage of ``scheme`` is a RATTLE-family substep."""
    return bool(np.all(np.asarray(scheme)[:, KIND] == RATTLE))


def rows_needed(scheme: np.ndarray) -> int:
    """Rows of warm starts a run of ``scheme`` uses (the stages' rows; at least the extrapolation history's)."""
    from mbvi.engine.fields import WARM_ROWS

    return max(WARM_ROWS, int(np.max(np.asarray(scheme)[:, ROW])) + 1)
