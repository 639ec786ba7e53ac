"""The double pendulum in its angles: a Lagrangian in θ₁, θ₂, integrated by symplectic Euler-B.

The seed's own formulation: L = T − V in the two angles (from the downward
vertical, rad) with the configuration-dependent inertia
M(θ) = [[(m₁+m₂)l₁², m₂l₁l₂cos(θ₁−θ₂)], [·, m₂l₂²]], stepped by
p₊ = p − h ∂H/∂q(q, p₊) (Newton), q₊ = q + h ∂H/∂p(q, p₊). The picture is its
state space: the trail of (θ₁, θ₂) on the torus of two angles. The initial
state is the system's own (``initial_state=``), which the command line uses.
"""

from __future__ import annotations

import sympy as sp

import mbvi

T_END = 20.0
DT = 1e-3
INTEGRATOR = "symplectic_euler_b"
GALLERY_T_END = 20.0


def build(
    m1: float = 1.0,
    m2: float = 1.0,
    l1: float = 1.0,
    l2: float = 1.0,
    g: float = 9.81,
    theta1: float = 1.5,
    theta2: float = 1.0,
) -> mbvi.LagrangianSystem:
    """Double pendulum in θ₁, θ₂ (rad) released from rest; masses kg, lengths m, g m/s².

    The masses, lengths and g are the system's ``parameters``: its compiled kernels read them at run time, so a
    sweep over them (``mbvi sweep scenes/double_pendulum_angles.py --grid l2=...``) compiles once."""
    th1, th2, w1, w2 = sp.symbols("theta1 theta2 omega1 omega2")
    m1_, m2_, l1_, l2_, g_ = sp.symbols("m1 m2 l1 l2 g", positive=True)
    T = (m1_ + m2_) * l1_**2 * w1**2 / 2 + m2_ * l2_**2 * w2**2 / 2 + m2_ * l1_ * l2_ * w1 * w2 * sp.cos(th1 - th2)
    V = -(m1_ + m2_) * g_ * l1_ * sp.cos(th1) - m2_ * g_ * l2_ * sp.cos(th2)
    return mbvi.LagrangianSystem(
        T - V,
        coordinates=[th1, th2],
        velocities=[w1, w2],
        parameters={m1_: m1, m2_: m2, l1_: l1, l2_: l2, g_: g},
        initial_state=mbvi.State([theta1, theta2], [0.0, 0.0]),
        name="double pendulum in angles",
    )
