"""SHAKE's warm start rule, written once for the NumPy path and the compiled engine.

Plain Python on floats or arrays (no numba here, so the NumPy path imports it
without loading the compiler): :mod:`mbvi.engine.kernels` compiles these same
functions, so the two paths do the same floating-point operations.
"""

from __future__ import annotations

__all__ = ["best_order", "extrapolated"]


def extrapolated(order, now, p1, p2, p3):
    """The multipliers of the next step extrapolated with a polynomial of ``order`` (0 … 3) through the
    last ones: now, 2 now − p₁, 3 now − 3p₁ + p₂, 4 now − 6p₁ + 4p₂ − p₃."""
    if order == 0:
        return now
    if order == 1:
        return 2.0 * now - p1
    if order == 2:
        return 3.0 * now - 3.0 * p1 + p2
    return 4.0 * now - 6.0 * p1 + 4.0 * p2 - p3


def best_order(known, e0, e1, e2, e3):
    """The order (0 … 3, at most known − 1) whose miss is least; a higher order must halve the miss of the
    best lower one, so that noise alone does not switch orders. With fewer than two steps known there is
    nothing to compare: linear when one is, none when none is (the misses are not read)."""
    if known < 2:
        return known
    top = min(known - 1, 3)
    order, best = 0, e0
    if top >= 1 and e1 < 0.5 * best:
        order, best = 1, e1
    if top >= 2 and e2 < 0.5 * best:
        order, best = 2, e2
    if top >= 3 and e3 < 0.5 * best:
        order = 3
    return order
