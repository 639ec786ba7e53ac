"""The dynamic state: positions and velocities (the model holds none)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["State"]


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
