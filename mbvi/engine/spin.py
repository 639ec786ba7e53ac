"""S⁻¹ x for a rigid body's rotation columns: torques and rates off the rotation group (numba, inlined).

S = ½ (Σ |rᵢ|² 1 − Σ rᵢ rᵢᵀ) of the columns rᵢ maps a rigid spin ξ of the columns to the ω = ½ Σ rᵢ × ṙᵢ it
reads, and a generalized force ½ τ × rᵢ on the columns to the torque it exerts (S τ). S is the identity where
the columns are orthonormal; the implicit pair evaluates forces at (q₀ + q₁)/2, where they are not quite: with
S⁻¹ a torque put on the columns as ½ (S⁻¹ τ) × rᵢ is exactly τ, and a rate read as S⁻¹ ω is blind to a rigid
spin of the whole (:func:`mbvi.forcelaws.builtin._spin_inverse`, the NumPy laws'). One definition for the
engine's kernels, the compiled kernels of users' loads and (through ``py_func``, the same operations on
floats, so the same bits) their Python callbacks.
"""

from __future__ import annotations

from numba import njit

__all__ = ["spin_solve"]


@njit(inline="always")
def spin_solve(q, a0, a1, a2, x0, x1, x2):
    """S⁻¹ (x0, x1, x2) for the columns at q[a0:a0+3], q[a1:a1+3], q[a2:a2+3] (S symmetric: its cofactors)."""
    s00 = s01 = s02 = s11 = s12 = s22 = 0.0
    for a in (a0, a1, a2):
        r0, r1, r2 = q[a], q[a + 1], q[a + 2]
        s00 += r0 * r0
        s01 += r0 * r1
        s02 += r0 * r2
        s11 += r1 * r1
        s12 += r1 * r2
        s22 += r2 * r2
    tr = s00 + s11 + s22
    b00, b11, b22 = 0.5 * (tr - s00), 0.5 * (tr - s11), 0.5 * (tr - s22)
    b01, b02, b12 = -0.5 * s01, -0.5 * s02, -0.5 * s12
    c00, c01, c02 = b11 * b22 - b12 * b12, b02 * b12 - b01 * b22, b01 * b12 - b02 * b11
    c11, c12, c22 = b00 * b22 - b02 * b02, b01 * b02 - b00 * b12, b00 * b11 - b01 * b01
    det = b00 * c00 + b01 * c01 + b02 * c02
    return (
        (c00 * x0 + c01 * x1 + c02 * x2) / det,
        (c01 * x0 + c11 * x1 + c12 * x2) / det,
        (c02 * x0 + c12 * x1 + c22 * x2) / det,
    )
