"""mbvi-compositions: higher-order symmetric compositions of RATTLE, declared as data.

A symmetric composition Φ_h = φ_{w_m h} ∘ … ∘ φ_{w_1 h} of a symmetric method φ
of order 2 (mbvi's ``verlet``, RATTLE) is of order 4, 6, … when its weights
solve the order conditions (Hairer, Lubich & Wanner, *Geometric Numerical
Integration*, §V.3). Each integrator here is a :class:`mbvi.Composition`: a
name, an order, a base and the weights — nothing else. mbvi runs them in its
compiled loop, serial and batched, like its built-ins; they stay symplectic,
variational and symmetric, with exact momentum maps and constraints to solver
tolerance.

* ``forest_ruth`` (order 4): Forest & Ruth (1990), the triple jump θ, 1 − 2θ, θ,
  θ = 1/(2 − 2^{1/3}) (the weights of mbvi's ``yoshida4``, found independently).
* ``suzuki4`` (order 4): Suzuki's fractal (1990), five stages p, p, 1 − 4p, p, p,
  p = 1/(4 − 4^{1/3}): more work a step, an error constant about ten times smaller.
* ``yoshida6`` (order 6): Yoshida (1990), solution A, seven stages.

Registered through the ``register_integrators`` hook and the entry point
``compositions = "mbvi_compositions"`` of the group ``mbvi``.
"""

from __future__ import annotations

import mbvi

__all__ = ["ForestRuth", "Suzuki4", "Yoshida6", "register_integrators"]
__version__ = "0.1.0"

_THETA = 1.0 / (2.0 - 2.0 ** (1.0 / 3.0))
_P = 1.0 / (4.0 - 4.0 ** (1.0 / 3.0))
#: Yoshida (1990), Table 1, solution A: w1, w2, w3 (w0 = 1 − 2(w1 + w2 + w3))
_W1, _W2, _W3 = -1.17767998417887, 0.235573213359357, 0.784513610477560
_W0 = 1.0 - 2.0 * (_W1 + _W2 + _W3)


class ForestRuth(mbvi.Composition):
    """Forest–Ruth: fourth order, three RATTLE stages (θ, 1 − 2θ, θ), θ = 1/(2 − 2^{1/3})."""

    name = "forest_ruth"
    order = 4
    base = "verlet"
    weights = (_THETA, 1.0 - 2.0 * _THETA, _THETA)


class Suzuki4(mbvi.Composition):
    """Suzuki's fractal: fourth order, five RATTLE stages (p, p, 1 − 4p, p, p), p = 1/(4 − 4^{1/3})."""

    name = "suzuki4"
    order = 4
    base = "verlet"
    weights = (_P, _P, 1.0 - 4.0 * _P, _P, _P)


class Yoshida6(mbvi.Composition):
    """Yoshida's sixth order, solution A: seven RATTLE stages (w3, w2, w1, w0, w1, w2, w3)."""

    name = "yoshida6"
    order = 6
    base = "verlet"
    weights = (_W3, _W2, _W1, _W0, _W1, _W2, _W3)


@mbvi.hookimpl
def register_integrators(register):
    """Register the compositions with mbvi (called once, when the registry is first used)."""
    for cls in (ForestRuth, Suzuki4, Yoshida6):
        register(cls)
