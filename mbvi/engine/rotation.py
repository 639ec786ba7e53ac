"""Per-body kernels of the Lie-group (Cayley) rotation update (numba, cached on disk).

A rigid body's configuration is (x, R) with R = [c₁ c₂ c₃] stored as three
columns of ``q`` (principal axes, so the body-frame inertia J is diagonal).
Its velocity inside the compiled loop is (ẋ, ω) with ω in the body frame; the
trajectory stores Ṙ = R ω̂ column by column.

The rotational drift is the discrete Euler–Lagrange map of the Cayley
discrete Lagrangian L_d = (h/2) ξᵀJξ, R₁ = R₀ cay(hξ) (Lee, Leok &
McClamroch 2007; Kobilarov & Marsden 2011): given the body momentum π⁺ at
the start of the drift, solve

    (I + x̂/2 + x xᵀ/4) J x = h π⁺ ,    x = hξ,

for x by Newton (a solution exists for every π⁺: the left side grows as
|x|³), then R₁ = R₀ cay(x) and π⁻ = cay(x)ᵀ π⁺. The spatial momentum R π is
carried over exactly and |π| too. A step turns the body by 2 atan(|x|/2) < π
for any spin, so no step size is too large for a step to exist.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

__all__ = ["body_rates", "body_torque", "cayley", "cayley_parameter", "column_rates", "drift_body", "mean_rate"]

jit = njit(cache=True, nogil=True, error_model="numpy")

# (a, b) of the body-frame component k: ω_k = Σᵢ R_ia Ṙ_ib terms (see :func:`body_rates`)
_A = (2, 0, 1)
_B = (1, 2, 0)


@jit
def cayley(x, out):
    """out (3, 3) = cay(x) = (I − x̂/2)⁻¹ (I + x̂/2)."""
    a, b, c = x[0], x[1], x[2]
    s = a * a + b * b + c * c
    d = 1.0 / (1.0 + 0.25 * s)  # cay(x) = I + d (x̂ + x̂²/2), x̂² = x xᵀ − |x|² I
    out[0, 0] = 1.0 - 0.5 * d * (b * b + c * c)
    out[1, 1] = 1.0 - 0.5 * d * (a * a + c * c)
    out[2, 2] = 1.0 - 0.5 * d * (a * a + b * b)
    out[0, 1] = d * (0.5 * a * b - c)
    out[1, 0] = d * (0.5 * a * b + c)
    out[0, 2] = d * (0.5 * a * c + b)
    out[2, 0] = d * (0.5 * a * c - b)
    out[1, 2] = d * (0.5 * b * c - a)
    out[2, 1] = d * (0.5 * b * c + a)


@jit
def _residual(J, x, hpi, r):
    jx0, jx1, jx2 = J[0] * x[0], J[1] * x[1], J[2] * x[2]
    xjx = x[0] * jx0 + x[1] * jx1 + x[2] * jx2
    r[0] = jx0 + 0.5 * (x[1] * jx2 - x[2] * jx1) + 0.25 * x[0] * xjx - hpi[0]
    r[1] = jx1 + 0.5 * (x[2] * jx0 - x[0] * jx2) + 0.25 * x[1] * xjx - hpi[1]
    r[2] = jx2 + 0.5 * (x[0] * jx1 - x[1] * jx0) + 0.25 * x[2] * xjx - hpi[2]
    return math.sqrt(r[0] * r[0] + r[1] * r[1] + r[2] * r[2])


@jit
def _solve3(D, r, out):
    """out = D⁻¹ r for a 3×3 D (Cramer's rule; no allocation, no LAPACK call)."""
    c00 = D[1, 1] * D[2, 2] - D[1, 2] * D[2, 1]
    c01 = D[1, 2] * D[2, 0] - D[1, 0] * D[2, 2]
    c02 = D[1, 0] * D[2, 1] - D[1, 1] * D[2, 0]
    det = D[0, 0] * c00 + D[0, 1] * c01 + D[0, 2] * c02
    c10 = D[0, 2] * D[2, 1] - D[0, 1] * D[2, 2]
    c11 = D[0, 0] * D[2, 2] - D[0, 2] * D[2, 0]
    c12 = D[0, 1] * D[2, 0] - D[0, 0] * D[2, 1]
    c20 = D[0, 1] * D[1, 2] - D[0, 2] * D[1, 1]
    c21 = D[0, 2] * D[1, 0] - D[0, 0] * D[1, 2]
    c22 = D[0, 0] * D[1, 1] - D[0, 1] * D[1, 0]
    out[0] = (c00 * r[0] + c10 * r[1] + c20 * r[2]) / det
    out[1] = (c01 * r[0] + c11 * r[1] + c21 * r[2]) / det
    out[2] = (c02 * r[0] + c12 * r[1] + c22 * r[2]) / det


@jit
def cayley_parameter(J, hpi, x):
    """Solve (I + x̂/2 + xxᵀ/4) J x = hπ for x in place (x holds the first guess); False if Newton fails.

    Newton with a backtracking line search on |residual|; converges to round-off.
    """
    r = np.empty(3)
    D = np.empty((3, 3))
    dx = np.empty(3)
    xt = np.empty(3)
    jx = np.empty(3)
    scale = abs(hpi[0]) + abs(hpi[1]) + abs(hpi[2]) + 1e-300
    res = _residual(J, x, hpi, r)
    for _ in range(60):
        if res <= 4e-16 * scale:
            return True
        for i in range(3):
            jx[i] = J[i] * x[i]
        xjx = x[0] * jx[0] + x[1] * jx[1] + x[2] * jx[2]
        # D = J + ½(x̂J − (Jx)^) + ¼((xᵀJx) I + 2 x (Jx)ᵀ)
        for i in range(3):
            for j in range(3):
                D[i, j] = 0.5 * x[i] * jx[j]
            D[i, i] += J[i] + 0.25 * xjx
        D[0, 1] += 0.5 * (-x[2] * J[1]) - 0.5 * (-jx[2])
        D[0, 2] += 0.5 * (x[1] * J[2]) - 0.5 * (jx[1])
        D[1, 0] += 0.5 * (x[2] * J[0]) - 0.5 * (jx[2])
        D[1, 2] += 0.5 * (-x[0] * J[2]) - 0.5 * (-jx[0])
        D[2, 0] += 0.5 * (-x[1] * J[0]) - 0.5 * (-jx[1])
        D[2, 1] += 0.5 * (x[0] * J[1]) - 0.5 * (jx[0])
        _solve3(D, r, dx)
        step = 1.0
        while True:
            for i in range(3):
                xt[i] = x[i] - step * dx[i]
            rt = _residual(J, xt, hpi, r)
            if rt < res or step < 1e-3:
                break
            step *= 0.5
        x[:] = xt
        res = _residual(J, x, hpi, r)
        if not res < math.inf:
            return False
    return res <= 1e-12 * scale


@jit
def drift_body(J, R0, w, h, x, R1, w1):
    """Free rotational drift from body rate w over h: R₁ = R₀ cay(x); w1 = J⁻¹ cay(x)ᵀ J w, the rate after.

    ``x`` (3) holds the first guess of the Cayley parameter and returns it.
    Returns False when the Cayley solve fails.
    """
    hpi = np.empty(3)
    C = np.empty((3, 3))
    for i in range(3):
        hpi[i] = h * J[i] * w[i]
    if not cayley_parameter(J, hpi, x):
        return False
    cayley(x, C)
    for i in range(3):
        for j in range(3):
            R1[i, j] = R0[i, 0] * C[0, j] + R0[i, 1] * C[1, j] + R0[i, 2] * C[2, j]
    # R₁ ← R₁ (3I − R₁ᵀR₁)/2: round-off of the product (1e-16 per step) does not accumulate in RᵀR − I
    G = np.empty((3, 3))
    for i in range(3):
        for j in range(3):
            G[i, j] = -0.5 * (R1[0, i] * R1[0, j] + R1[1, i] * R1[1, j] + R1[2, i] * R1[2, j])
        G[i, i] += 1.5
    for i in range(3):
        r0, r1, r2 = R1[i, 0], R1[i, 1], R1[i, 2]
        for j in range(3):
            R1[i, j] = r0 * G[0, j] + r1 * G[1, j] + r2 * G[2, j]
    # π⁻ = cay(x)ᵀ π⁺
    for j in range(3):
        w1[j] = (C[0, j] * J[0] * w[0] + C[1, j] * J[1] * w[1] + C[2, j] * J[2] * w[2]) / J[j]
    return True


@jit
def mean_rate(x, h, out):
    """The body-frame rate log(cay(x))/h at which a drift with Cayley parameter x turns (rad/s)."""
    s = math.sqrt(x[0] * x[0] + x[1] * x[1] + x[2] * x[2])
    f = 1.0 / h if s < 1e-8 else 2.0 * math.atan(0.5 * s) / (s * h)
    for i in range(3):
        out[i] = f * x[i]


@jit
def body_rates(q, vq, o, w):
    """Body-frame ω of the body whose x starts at q[o], from its column rates Ṙ (skew part of RᵀṘ).

    The same map as :func:`body_torque`, halved: Σ_c c_c × ċ_c = 2Rω.
    """
    body_torque(q, vq, o, w)
    for k in range(3):
        w[k] *= 0.5


@jit
def column_rates(q, w, o, vq):
    """Ṙ = R ω̂ written into vq's rotation columns of the body at q[o] (column b: R (ω × e_b))."""
    for b in range(3):
        # ω × e_b
        e0 = 0.0
        e1 = 0.0
        e2 = 0.0
        if b == 0:
            e1, e2 = w[2], -w[1]
        elif b == 1:
            e0, e2 = -w[2], w[0]
        else:
            e0, e1 = w[1], -w[0]
        for i in range(3):
            vq[o + 3 + 3 * b + i] = q[o + 3 + i] * e0 + q[o + 6 + i] * e1 + q[o + 9 + i] * e2


@jit
def body_torque(q, fq, o, out):
    """Body-frame torque τ_k = Σᵢ R_ia f_{c_b,i} − R_ib f_{c_a,i} from the generalized force on R's columns."""
    for k in range(3):
        a, b = _A[k], _B[k]
        s = 0.0
        for i in range(3):
            s += q[o + 3 + 3 * a + i] * fq[o + 3 + 3 * b + i] - q[o + 3 + 3 * b + i] * fq[o + 3 + 3 * a + i]
        out[k] = s
