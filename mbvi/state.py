"""The dynamic state: positions and velocities (the model holds none)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["State", "real_array", "stack_states"]


@dataclass(frozen=True, slots=True)
class State:
    """Generalized positions and velocities.

    Parameters
    ----------
    q : ndarray, shape (nq,)
        Generalized coordinates (m for positions; rotation columns are dimensionless).
    v : ndarray, shape (nq,)
        Their time derivatives.
    """

    q: np.ndarray
    v: np.ndarray

    def copy(self) -> State:
        """A deep copy."""
        return State(self.q.copy(), self.v.copy())


def real_array(values: Any, what: str) -> np.ndarray:
    """``values`` as a float array (a copy), or a ValueError naming ``what``: numbers with an imaginary part lost
    it with only numpy's ComplexWarning (a velocity of 5j ran from rest), and text said only "could not convert
    string to float", naming nothing."""
    try:
        given = np.asarray(values)
    except ValueError:  # (rows of other lengths)
        given = np.asarray(values, dtype=object)
    if given.dtype.kind == "c" or (given.dtype == object and any(isinstance(x, complex) for x in given.ravel())):
        raise ValueError(f"{what} must be real numbers, got complex ones")
    try:
        return np.array(values, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what} must be numbers ({exc})") from None


def stack_states(initial_states: Any, nq: int) -> tuple[np.ndarray, np.ndarray]:
    """A batch's initial states as arrays Q, V of shape (B, nq): from a sequence of :class:`State` or (Q, V).

    Raises
    ------
    ValueError
        Anything else, states of another shape, or a state that is not finite (naming it).
    """
    if isinstance(initial_states, tuple) and len(initial_states) == 2 and not isinstance(initial_states[0], State):
        try:  # (Q, V): arrays, or lists of rows
            Q, V = real_array(initial_states[0], "Q"), real_array(initial_states[1], "V")
        except ValueError as exc:  # rows of other lengths, or not numbers
            raise ValueError(
                f"simulate_batch: initial_states (Q, V) must be two arrays of shape (B, {nq}) of real numbers ({exc})"
            ) from None
    else:
        try:
            states = list(initial_states)
        except TypeError:
            states = []
        if not states or not all(isinstance(s, State) for s in states):
            raise ValueError("simulate_batch: initial_states must be a non-empty sequence of mbvi.State or (Q, V)")
        for b, s in enumerate(states):  # named before numpy stacks them ("inhomogeneous shape")
            if np.shape(s.q) != (nq,) or np.shape(s.v) != (nq,):
                raise ValueError(
                    f"simulate_batch: initial state {b} has q of shape {np.shape(s.q)} and v of shape "
                    f"{np.shape(s.v)}; the system's are ({nq},)"
                )
        Q = np.array([real_array(s.q, f"simulate_batch: initial state {b}'s q") for b, s in enumerate(states)])
        V = np.array([real_array(s.v, f"simulate_batch: initial state {b}'s v") for b, s in enumerate(states)])
    if Q.ndim == 2 and V.ndim == 2 and Q.shape[1:] == V.shape[1:] == (nq,) and len(Q) != len(V):
        raise ValueError(f"simulate_batch: Q holds {len(Q)} states and V {len(V)}: give one velocity per state")
    if Q.ndim != 2 or Q.shape != V.shape or Q.shape[1] != nq or len(Q) == 0:
        raise ValueError(f"simulate_batch: states must have shape (B, {nq}) with B ≥ 1")
    if not (np.all(np.isfinite(Q)) and np.all(np.isfinite(V))):
        bad = int(np.argmin(np.isfinite(Q).all(axis=1) & np.isfinite(V).all(axis=1)))
        raise ValueError(f"simulate_batch: initial state {bad} is not finite")
    return Q, V
