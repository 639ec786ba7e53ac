"""Integrators for a :class:`~mbvi.lagrangian.LagrangianSystem` (configuration-dependent mass).

Variational methods come from one family of discrete Lagrangians, quadrature
rules of the action over a step::

    L_d(q₀, q₁) = h Σᵢ wᵢ L(q₀ + cᵢ (q₁ − q₀), (q₁ − q₀)/h, t + cᵢ h)

=================== ============== ============ ===================================
name                nodes cᵢ       weights wᵢ   scheme
=================== ============== ============ ===================================
symplectic_euler_a  1              1            q₁ = q + h H_p(q₁, p), p₁ = p − h H_q(q₁, p)
symplectic_euler_b  0              1            p₁ = p − h H_q(q, p₁), q₁ = q + h H_p(q, p₁)
verlet              0, 1           ½, ½         Störmer–Verlet/RATTLE for constant mass
midpoint            ½              1            trep's MidpointVI; implicit midpoint for constant mass
=================== ============== ============ ===================================

Each step solves the forced, constrained discrete Euler–Lagrange equations in
position–momentum form by Newton's method with the analytic Jacobian (from
the symbolic Hessians of L, g and Q)::

    p_k + D₁L_d(q_k, q_{k+1}) + f⁻ + G(q_k)ᵀλ = 0,    g(q_{k+1}) = 0
    p_{k+1} = D₂L_d(q_k, q_{k+1}) + f⁺

with the discrete Lagrange–d'Alembert forces f⁻ = h Σ wᵢ(1 − cᵢ) Q(xᵢ, v, tᵢ),
f⁺ = h Σ wᵢ cᵢ Q(xᵢ, v, tᵢ) (the virtual work of Q over the step, split
between its ends by the same quadrature). The velocity at a knot is the
discrete Legendre transform: the v with ∂L/∂v(q_{k+1}, v) = p_{k+1} − G(q_{k+1})ᵀμ
and G(q_{k+1}) v = 0 (the momentum projected onto the constraints; the
projection does not change the positions, whose multiplier absorbs it).

The baselines ``explicit_euler``, ``implicit_euler`` (backward Euler in
(q, p)) and ``csm`` (Baumgarte index-1 with :func:`scipy.integrate.solve_ivp`)
are not variational. :data:`INTEGRATORS` maps each name to its class.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any, ClassVar

import numpy as np

from mbvi import interrupts
from mbvi._validate import is_number, positive_seconds
from mbvi.engine.runner import saved_states
from mbvi.errors import SolverError
from mbvi.integrators.base import Integrator, option_hints

__all__ = ["INTEGRATORS", "LagrangianIntegrator", "Run", "constrained_acceleration"]


def _solve(K: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """Dense solve of a step's matrix, equilibrated; least squares for a singular or nearly singular one
    (redundant constraints).

    Rows, then columns, are scaled to a largest entry of 1 first. A step's matrix [[J, G₀ᵀ], [G₁, 0]] has
    J ≈ −M/h beside constraint rows of order one: a 1e6 kg pendulum at dt = 1e-3 made its condition number
    2.5e17, least squares then dropped the constraint's direction and the rod stretched by 1e-2 m, silently
    (and a 0.1 mm pendulum lost its rod alike). Equilibrated, the same matrix is well conditioned. LU with a
    pivot of round-off size returns a finite but meaningless solution (multipliers of redundant constraints
    huge and cancelling): such a matrix goes to least squares (the minimum-norm multipliers).
    """
    with np.errstate(divide="ignore"):
        r = 1.0 / np.max(np.abs(K), axis=1)
    r[~np.isfinite(r)] = 1.0
    Kr = K * r[:, None]
    with np.errstate(divide="ignore"):
        c = 1.0 / np.max(np.abs(Kr), axis=0)
    c[~np.isfinite(c)] = 1.0
    Ks, b = Kr * c[None, :], rhs * r
    if np.linalg.cond(Ks) < 1e13:
        try:
            y = np.linalg.solve(Ks, b)
            if np.all(np.isfinite(y)):
                return c * y
        except np.linalg.LinAlgError:
            pass
    return c * np.linalg.lstsq(Ks, b, rcond=None)[0]


def _step_scale(q0: np.ndarray, q1: np.ndarray) -> float:
    """What a step's Newton corrections are measured against, in the coordinates' units: max(|q₀|, |q₁|, |q₁ − q₀|)
    (not |q₁| alone: a pendulum whose step landed within 1e-7 rad of θ = 0 had its corrections held to 1e-19 rad,
    under their round-off, and implicit Euler failed there).

    Relative, with no floor of 1: ``tol`` (1 + |q|) was an absolute 1e-12 for coordinates of 1e-10 m, 1 % of an
    argon dimer's motion, and its energy drifted where the same run in reduced units held its band. The floor
    1e-290 only stands for a system at rest at q = 0, whose corrections are exactly zero.
    """
    if not len(q1):
        return 1e-290
    return max(float(np.max(np.abs(q0))), float(np.max(np.abs(q1))), float(np.max(np.abs(q1 - q0))), 1e-290)


def _finite_lagrangian(L: float, q: np.ndarray) -> None:
    """ValueError (a motion out of L's domain, which the run reports as such) when L is not finite where a step
    lands: symplectic Euler B's step never evaluated L at q₁, and a run pulled into x = 0 of L = v²/2 − log x
    saved a state of x < 0 with energy NaN."""
    if not np.isfinite(L):
        raise ValueError(f"L = {L} at q = {np.array2string(np.asarray(q), precision=4)}")


def _check_landing(integrator: Any, q1: np.ndarray, v1: np.ndarray, t1: float, Lvv: np.ndarray | None,
                   start: tuple) -> None:  # fmt: skip
    """SolverError when a step converged onto a state whose mass matrix ∂²L/∂v² is singular or indefinite (at
    t1, s): symplectic Euler's step crossed q = 1 of L = (1 − q²) v²/2, backward Euler ran through a mass m(t)
    reaching 0, and the runs went on with no motion L could give (states of negative mass returned).

    ``Lvv``: the mass matrix there when the step has it (the check is then an LDLᵀ's pivots, a few µs).
    ``start``: the step's (q₀, v₀, p₀, t₀): when two steps of half the size from it stay where L gives a motion,
    the step was only too large (a stiff spring's overshoot), and the error suggests half of it; else no step
    size helps, and it says so."""
    if Lvv is not None and _positive_definite(Lvv):
        return
    if not (np.isfinite(q1).all() and np.isfinite(v1).all()):  # a blow-up: the run's non-finite check says so
        return
    w = integrator.system.mass_defect(q1, v1, t1)
    if w is None:
        return
    what = ("not finite" if not len(w) else
            f"singular or indefinite (eigenvalues {np.array2string(w, precision=3)})")  # fmt: skip
    where = f"integrator {integrator.name!r}: the step reached q = {np.asarray(q1).tolist()} at t = {t1:g} s, where "
    if _half_steps_work(integrator, *start):
        raise SolverError(where + f"the mass matrix ∂²L/∂v² is {what}, a step too large: two of half its size stay "
                          "where L gives a motion", suggested_dt=integrator.dt / 2)  # fmt: skip
    raise SolverError(where + f"the mass matrix ∂²L/∂v² is {what}: L gives no motion there at any step size")


def _half_steps_work(integrator: Any, q0: np.ndarray, v0: np.ndarray, p0: np.ndarray, t0: float) -> bool:
    """Whether two steps of half ``integrator``'s size from (q₀, v₀, p₀) at t₀ are taken (no SolverError: they
    stay where L gives a motion). A step that fails at every size fails at half of it too; only such a failure's
    verdict pays for this (two NumPy steps)."""
    if getattr(integrator, "_halved", False):  # (a half step's own failure is final, not halved again)
        return False
    options = {k: getattr(integrator, k) for k in integrator.options}
    half = type(integrator)(integrator.system, integrator.dt / 2, **options)
    # the second ends where the full step does, at t₀ + h to the bit (t₀ + h/2 + h/2 fell short of a mass m(t)
    # reaching 0 at t₀ + h by one ulp, and the halves "worked"): tₘ + (t₁ − tₘ) is t₁, the difference exact
    t1 = t0 + integrator.dt
    tm = t0 + half.dt
    rest = half if tm + half.dt == t1 else type(integrator)(integrator.system, t1 - tm, **options)
    half._halved = rest._halved = True
    try:
        with np.errstate(all="ignore"):
            q, v, p = half.step(np.array(q0, dtype=float), np.array(v0, dtype=float), np.array(p0, dtype=float), t0)
            q, v, p = rest.step(q, v, p, tm)
    except (SolverError, ValueError, ArithmeticError, np.linalg.LinAlgError):
        return False
    return bool(np.isfinite(q).all() and np.isfinite(v).all())


def _positive_definite(M: np.ndarray) -> bool:
    """Whether the symmetric part of M is positive definite, every pivot of its Cholesky factor above 1e-12 of
    its own diagonal entry (:meth:`mbvi.LagrangianSystem.mass_defect`'s threshold, without eigenvalues): the
    test of the Jacobi-scaled matrix, so that diag(1, r²) of a satellite in metres passes."""
    n = len(M)
    if n > 4:
        S = 0.5 * (M + M.T)
        diag = np.diag(S)
        if not np.all(diag > 0.0):
            return False
        try:
            d = np.diag(np.linalg.cholesky(S)) ** 2
        except np.linalg.LinAlgError:
            return False
        return bool(np.all(d > 1e-12 * diag))
    a = M.tolist()  # the few coordinates written by hand: LDLᵀ in floats, ~1 µs against ~10 through NumPy
    L = [[0.0] * n for _ in range(n)]
    D = [0.0] * n
    for j in range(n):
        d = a[j][j] - sum(L[j][k] * L[j][k] * D[k] for k in range(j))
        if not d > 1e-12 * a[j][j]:
            return False
        D[j] = d
        for i in range(j + 1, n):
            L[i][j] = (0.5 * (a[i][j] + a[j][i]) - sum(L[i][k] * L[j][k] * D[k] for k in range(j))) / d
    return True


def _singular_mass(system, q: np.ndarray, v: np.ndarray, t: float, h: float, ahead: bool = False) -> str | None:
    """Where the mass matrix ∂²L/∂v² is singular, indefinite or not finite on the way of a step that failed: at
    its start or where the motion carries it (q + h v at t + h; with ``ahead``, also q + 2 h v and q + 4 h v, a
    straight line that only a check with half steps can confirm: :func:`_newton_failure`) — L = (1 − q²) v²/2
    reaching q = 1 (:meth:`mbvi.LagrangianSystem.mass_defect`). None otherwise."""
    q, v = np.asarray(q, dtype=float), np.asarray(v, dtype=float)
    for k in (0, 1, 2, 4) if ahead else (0, 1):
        where = q + k * h * v
        w = system.mass_defect(where, v, t + k * h)
        if w is not None and not len(w):
            return f"the mass matrix ∂²L/∂v² is not finite at q = {where.tolist()}: L gives no motion there"
        if w is not None:
            return (f"the mass matrix ∂²L/∂v² is singular or indefinite at q = {where.tolist()} (eigenvalues "
                    f"{np.array2string(w, precision=3)}), where the motion goes: L gives no motion there at any "
                    "step size")  # fmt: skip
    return None


def _newton_failure(integrator: Any, q0: np.ndarray, v0: np.ndarray, p0: np.ndarray, t: float,
                    what: str) -> SolverError:  # fmt: skip
    """The SolverError of a step whose Newton did not converge: "no step size helps" when the motion heads where
    the mass matrix is singular within the step, or a few steps ahead and two half steps fail too (Newton of
    symplectic Euler A fails short of q = 1 of L = (1 − q²) v²/2, where v grows without bound: halving dt
    again and again did not help); else "try half the step"."""
    h = integrator.dt
    singular = _singular_mass(integrator.system, q0, v0, t, h)
    ahead = None
    if singular is None:
        singular = _singular_mass(integrator.system, q0, v0, t, h, ahead=True)
        if singular is not None and _half_steps_work(integrator, q0, v0, p0, t):
            singular, ahead = None, singular
    if singular is not None:
        return SolverError(f"integrator {integrator.name!r}: Newton did not converge: {singular}")
    err = SolverError(f"integrator {integrator.name!r}: {what}", suggested_dt=h / 2)
    # half steps creep on (backward Euler stays short of q = 1, a stiff spring's overshoot comes back): the hint is
    # half the step, and what lies ahead is said if no smaller step completes either
    err.ahead = None if ahead is None else f"a few steps ahead {ahead}"
    return err


class LagrangianIntegrator:
    """Abstract base class of the integrators of a LagrangianSystem.

    A subclass sets ``name``, ``order``, ``variational``/``symplectic`` and
    ``options`` (name → default), and implements :meth:`step` on the triple
    (q, v, p) with p = ∂L/∂v(q, v) (projected onto the constraints).

    Parameters
    ----------
    system : mbvi.LagrangianSystem
    dt : float
        Step size, s.
    **options
        Method options (see each class); unknown ones raise ``ValueError``.
    """

    name: ClassVar[str] = ""
    order: ClassVar[int] = 1
    variational: ClassVar[bool] = False
    symplectic: ClassVar[bool] = False
    #: damps the energy by its nature (backward Euler): judged by its gain alone (:func:`mbvi.runs.judged_by_balance`)
    dissipative: ClassVar[bool] = False
    options: ClassVar[dict[str, Any]] = {}
    #: the engine's method that is this integrator (:mod:`mbvi.engine.lagrange`), or None (NumPy only)
    compiled_method: ClassVar[int | None] = None

    def __init__(self, system: Any, dt: float, **options: Any) -> None:
        given, dt = dt, positive_seconds(dt)  # (NumPy numbers too)
        if dt is None:
            raise ValueError(f"{self.name}: dt must be a positive number, got {given!r}")
        for key in ("tol", "maxiter"):
            if key in options:  # as a scene's integrators check them (a NumPy number is a number)
                val = options[key].item() if isinstance(options[key], np.generic) else options[key]
                try:
                    options[key] = Integrator.check_option(key, val, integer=key == "maxiter")
                except ValueError as exc:
                    raise ValueError(f"integrator {self.name!r}: {exc}") from None
        unknown = set(options) - set(self.options)
        if unknown:
            raise ValueError(
                f"integrator {self.name!r} (for Lagrangian systems) does not take option(s) "
                f"{', '.join(sorted(unknown))}; it takes: {', '.join(sorted(self.options)) or 'none'}"
                + option_hints(sorted(unknown), self.options)
            )
        if "project" in options:  # as a scene's explicit_euler checks it
            try:
                options["project"] = Integrator.check_flag("project", options["project"])
            except ValueError as exc:
                raise ValueError(f"integrator {self.name!r}: {exc}") from None
        self.system = system
        self.dt = float(dt)
        for key, default in self.options.items():
            setattr(self, key, options.get(key, default))

    def step(self, q: np.ndarray, v: np.ndarray, p: np.ndarray, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One step of size ``dt`` from time ``t``: (q, v, p) → (q₁, v₁, p₁)."""
        raise NotImplementedError

    def integrate(
        self, q: np.ndarray, v: np.ndarray, t0: float, nsteps: int, save_every: int = 1, callback: Any = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Take ``nsteps`` steps, saving every ``save_every``-th state (the last one always).

        With a compiled form (:attr:`compiled_method`) and the system's derivatives compiled
        (:mod:`mbvi.lagrangian.codegen`) the steps are one call of the engine's loop
        (:func:`mbvi.engine.lagrange.run`); a step it hands back is taken by :meth:`step`.

        Returns
        -------
        t : ndarray, shape (k,)
        q, v, p : ndarray, shape (k, n)

        Raises
        ------
        SolverError
            With ``time``/``step`` set and ``partial`` = (t, q, v, p) saved so far.
        """
        n = self.system.nq
        nsave = nsteps // save_every + 1 + (nsteps % save_every != 0)
        Q, V, P = saved_states((nsave, n)), saved_states((nsave, n)), saved_states((nsave, n))
        q, v = np.array(q, dtype=float), np.array(v, dtype=float)
        p = np.array(self.system.momentum(q, v, t0), dtype=float)
        Q[0], V[0], P[0] = q, v, p
        run = Run(self, q, v, p, float(t0), nsteps, save_every, (Q, V, P))
        run.advance_to(nsteps, callback)
        j = run.j
        return run.times(j), Q[:j], V[:j], P[:j]

    def compiled_kernels(self) -> Any:
        """The system's compiled derivatives when this integrator has a compiled form, else None."""
        if self.compiled_method is None or type(self).step is not _STEPS.get(self.compiled_method):
            return None
        get = getattr(self.system, "compiled_kernels", None)
        return get() if get is not None else None

    # -- shared pieces -----------------------------------------------------------------------
    def _legendre(self, q: np.ndarray, p: np.ndarray, t: float, v: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
        """v with ∂L/∂v(q, v) + Gᵀμ = p, G v = 0; returns (v, p − Gᵀμ, the mass matrix ∂²L/∂v² it solved
        with: where the step lands, for :func:`_check_landing`). Newton from ``v``."""
        sysm, n, m = self.system, self.system.nq, self.system.nc
        G = sysm.constraint_jacobian(q) if m else None
        mu = np.zeros(m)
        for _ in range(1 if sysm.quadratic else 30):
            L, _, Lv, _, _, Lvv = sysm.point(q, v, t)
            _finite_lagrangian(L, q)
            r = Lv - p
            if m:
                r = r + G.T @ mu
                K = np.block([[Lvv, G.T], [G, np.zeros((m, m))]])
                dz = _solve(K, -np.concatenate([r, G @ v]))
            else:
                dz = np.linalg.solve(Lvv, -r)
            v = v + dz[:n]
            mu = mu + dz[n:]
            if sysm.quadratic or np.max(np.abs(dz[:n])) <= 1e-14 * (1.0 + np.max(np.abs(v))):
                break
        else:
            raise SolverError(f"integrator {self.name!r}: the discrete Legendre transform did not converge")
        return v, (p - G.T @ mu if m else p), Lvv


class _DiscreteLagrangian(LagrangianIntegrator):
    """Variational integrator of the quadrature discrete Lagrangian with nodes ``c`` and weights ``w``."""

    variational = True
    symplectic = True
    nodes: ClassVar[tuple[float, ...]] = ()
    weights: ClassVar[tuple[float, ...]] = ()
    options = {"tol": 1e-12, "maxiter": 50}
    compiled_method = 0  # mbvi.engine.lagrange.DISCRETE

    def _ends(
        self, q0: np.ndarray, dq: np.ndarray, t: float, jacobian: bool
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """(D₁L_d + f⁻, D₂L_d + f⁺, ∂(D₁L_d + f⁻)/∂q₁) of the step q₀ → q₀ + Δq.

        The step's unknown is the increment Δq, not q₁: formed as q₁ − q₀, it lost ε|q| to round-off, which the
        momenta D₂L_d ∝ Δq/h took as ε|q|/h a step (a spring pair 1000 m from the origin drifted its conserved
        momentum by 1.4e-8 in 1e5 steps; 4e-14 now, as at the origin)."""
        sysm, h = self.system, self.dt
        vel = dq / h
        a = b = J = 0.0
        point = sysm.derived.point
        for c, w in zip(self.nodes, self.weights, strict=True):
            ti = t + c * h
            x = q0 + c * dq if c else q0
            _, Lq, Lv, Lqq, Lqv, Lvv = point(x, vel, ti)
            a = a + (w * h * (1.0 - c)) * Lq - w * Lv if c != 1.0 else a - w * Lv
            b = b + (w * h * c) * Lq + w * Lv if c else b + w * Lv
            if jacobian:
                Jc = (-w / h) * Lvv
                if c == 0.0:
                    Jc += w * Lqv
                elif c == 1.0:
                    Jc -= w * Lqv.T
                else:
                    Jc += (w * h * c * (1.0 - c)) * Lqq + (w * (1.0 - c)) * Lqv - (w * c) * Lqv.T
                J = J + Jc
            if sysm.has_forces:
                Q, Qq, Qv = sysm.derived.force(x, vel, ti)
                a += (h * w * (1.0 - c)) * Q
                b += (h * w * c) * Q
                if jacobian:
                    J += (h * w * (1.0 - c)) * (c * Qq + Qv / h)
        return a, b, J

    def step(self, q0, v0, p0, t):
        sysm, h, n, m = self.system, self.dt, self.system.nq, self.system.nc
        dq = h * v0  # the unknown (see _ends)
        q1 = q0 + dq
        lam = np.zeros(m)
        G0 = sysm.constraint_jacobian(q0) if m else None
        zeros = np.zeros(m)
        K = np.zeros((n + m, n + m))
        if m:
            K[:n, n:] = G0.T
        prev = np.inf
        for _ in range(int(self.maxiter)):
            a, _, J = self._ends(q0, dq, t, True)
            r = p0 + a
            if m:
                r += G0.T @ lam
                g1, G1, _ = sysm.derived.constraint(q1, zeros)
                K[:n, :n] = J
                K[n:, :n] = G1
                dz = _solve(K, -np.concatenate([r, g1]))
            else:
                dz = np.linalg.solve(J, -r)
            dq = dq + dz[:n]
            q1 = q0 + dq
            lam = lam + dz[n:]
            size = float(np.max(np.abs(dz[:n])))
            if not size < np.inf:
                break
            # converged when this correction, or the next one Newton's quadratic rate predicts, is below tol
            bound = self.tol * _step_scale(q0, q1)
            if size <= bound or (prev < np.inf and size < 1e-3 * prev and size**3 <= 1e-2 * bound * prev**2):
                break
            prev = size
        else:
            raise _newton_failure(self, q0, v0, p0, t, f"Newton did not converge in {self.maxiter} iterations "
                                  f"(last correction {np.max(np.abs(dz[:n])):.3g})")  # fmt: skip
        _, p1, _ = self._ends(q0, dq, t, False)
        v1, p1, Lvv = self._legendre(q1, p1, t + h, dq / h)
        _check_landing(self, q1, v1, t + h, Lvv, (q0, v0, p0, t))
        return q1, v1, p1


class SymplecticEulerA(_DiscreteLagrangian):
    """Symplectic Euler A: L_d = h L(q₁, (q₁ − q₀)/h); q₁ = q + h H_p(q₁, p), p₁ = p − h H_q(q₁, p)."""

    name = "symplectic_euler_a"
    order = 1
    nodes = (1.0,)
    weights = (1.0,)


class SymplecticEulerB(_DiscreteLagrangian):
    """Symplectic Euler B: L_d = h L(q₀, (q₁ − q₀)/h); p₁ = p − h H_q(q, p₁), q₁ = q + h H_p(q, p₁)."""

    name = "symplectic_euler_b"
    order = 1
    nodes = (0.0,)
    weights = (1.0,)


class Verlet(_DiscreteLagrangian):
    """Trapezoid discrete Lagrangian; Störmer–Verlet (RATTLE with constraints) for a constant mass."""

    name = "verlet"
    order = 2
    nodes = (0.0, 1.0)
    weights = (0.5, 0.5)


class Midpoint(_DiscreteLagrangian):
    """Midpoint discrete Lagrangian L_d = h L((q₀ + q₁)/2, (q₁ − q₀)/h) (trep's MidpointVI)."""

    name = "midpoint"
    order = 2
    nodes = (0.5,)
    weights = (1.0,)


def constrained_acceleration(system: Any, q: np.ndarray, v: np.ndarray, t: float, alpha: float = 0.0) -> np.ndarray:
    """q̈ of the index-1 equations, with Baumgarte stabilization rate ``alpha`` (1/s).

    Solves M a + Gᵀλ = L_q + Q − (∂²L/∂v∂q) v − ∂²L/∂v∂t and
    G a = −γ − 2α G v − α² g (γ from :meth:`LagrangianSystem.constraint_curvature`).

    Returns
    -------
    a : ndarray, shape (n,)
    """
    n, m = system.nq, system.nc
    _, Lq, _, _, Lqv, Lvv = system.point(q, v, t)
    rhs = Lq - Lqv.T @ v
    if system.has_forces:
        rhs = rhs + system.force(q, v, t)
    if system.derived.explicit_time is not None:
        rhs = rhs - system.derived.explicit_time(q, v, t)[0]
    if not m:
        return np.linalg.solve(Lvv, rhs)
    g, G, _ = system.derived.constraint(q, np.zeros(m))
    c = -system.constraint_curvature(q, v)
    if alpha:
        c = c - 2.0 * alpha * (G @ v) - alpha * alpha * g
    K = np.block([[Lvv, G.T], [G, np.zeros((m, m))]])
    return _solve(K, np.concatenate([rhs, c]))[:n]


def _project_position(system: Any, q: np.ndarray, v: np.ndarray, t: float) -> np.ndarray:
    """Closest point on g = 0 in the mass-weighted norm (Newton on the minimum-norm correction)."""
    M = system.mass_matrix(q, v, t)
    for _ in range(50):
        g, G, _ = system.derived.constraint(q, np.zeros(system.nc))
        if np.max(np.abs(g)) <= 1e-13 * (1.0 + np.max(np.abs(q))):
            return q
        Minv_Gt = np.linalg.solve(M, G.T)
        q = q - Minv_Gt @ np.linalg.lstsq(G @ Minv_Gt, g, rcond=None)[0]
    raise SolverError("projection onto the constraints did not converge")


class ExplicitEuler(LagrangianIntegrator):
    """Explicit Euler: q₁ = q + h v, v₁ = v + h a(q, v, t) (not symplectic: energy grows).

    With ``project=True`` (default) q₁ and v₁ are projected back onto the
    constraints (mass-weighted).
    """

    name = "explicit_euler"
    order = 1
    options = {"project": True}

    def step(self, q, v, p, t):
        sysm, h = self.system, self.dt
        a = constrained_acceleration(sysm, q, v, t)
        q1 = q + h * v
        v1 = v + h * a
        if sysm.nc and self.project:
            q1 = _project_position(sysm, q1, v1, t + h)
            v1 = sysm.project_velocity(q1, v1, t + h)
        _, _, p1, _, _, Lvv = sysm.point(q1, v1, t + h)
        _check_landing(self, q1, v1, t + h, Lvv, (q, v, p, t))
        return q1, v1, p1


class ImplicitEuler(LagrangianIntegrator):
    """Backward Euler in (q, p): q₁ = q + h v₁, p₁ = p + h (L_q + Q)(q₁, v₁) − Gᵀλ, g(q₁) = 0.

    Not symplectic: energy decays at a rate set by the step. Newton on (v₁, λ);
    v₁ is then projected onto G(q₁) v = 0.
    """

    name = "implicit_euler"
    order = 1
    dissipative = True
    options = {"tol": 1e-12, "maxiter": 50}
    compiled_method = 1  # mbvi.engine.lagrange.IMPLICIT_EULER

    def step(self, q0, v0, p0, t):
        sysm, h, n, m = self.system, self.dt, self.system.nq, self.system.nc
        t1 = t + h
        v1 = v0.copy()
        lam = np.zeros(m)
        for _ in range(int(self.maxiter)):
            q1 = q0 + h * v1
            _, Lq, Lv, Lqq, Lqv, Lvv = sysm.point(q1, v1, t1)
            r = Lv - p0 - h * Lq
            J = h * Lqv.T + Lvv - h * (h * Lqq + Lqv)
            if sysm.has_forces:
                Q, Qq, Qv = sysm.derived.force(q1, v1, t1)
                r = r - h * Q
                J = J - h * (h * Qq + Qv)
            if m:
                g1, G1, H1 = sysm.derived.constraint(q1, lam)
                r = r + G1.T @ lam
                J = J + h * H1
                K = np.block([[J, G1.T], [h * G1, np.zeros((m, m))]])
                dz = _solve(K, -np.concatenate([r, g1]))
            else:
                dz = np.linalg.solve(J, -r)
            v1 = v1 + dz[:n]
            lam = lam + dz[n:]
            if np.max(np.abs(h * dz[:n])) <= self.tol * _step_scale(q0, q1):
                break
        else:
            raise _newton_failure(self, q0, v0, p0, t, "Newton did not converge")
        q1 = q0 + h * v1
        if m:
            v1 = sysm.project_velocity(q1, v1, t1)
        L1, _, p1, _, _, Lvv = sysm.point(q1, v1, t1)
        _finite_lagrangian(L1, q1)
        _check_landing(self, q1, v1, t1, Lvv, (q0, v0, p0, t))
        return q1, v1, p1


#: csm's evaluations of the right-hand side allowed while the run's time advances by one step of dt (the output
#: spacing): a pendulum's second takes 614 at rtol 1e-8, in one step of 1 s or in 1000 of 1 ms; a solver stalled
#: where the equations turn stiff takes them all within one step (each evaluation costs ~0.2 ms)
EVALUATIONS_PER_STEP = 20000


class _OverBudget(Exception):
    """csm's right-hand side was evaluated more often than its run may take."""

    def __init__(self, t: float) -> None:
        super().__init__(t)
        self.t = t


class CSM(LagrangianIntegrator):
    """Constraint stabilization (Baumgarte): g̈ + 2αġ + α²g = 0 with :func:`scipy.integrate.solve_ivp`.

    The whole interval is handed to ``solve_ivp``; ``dt`` only sets the output
    times, ``rtol``/``atol`` set the accuracy. Options: ``alpha`` (1/s,
    default 10), ``method`` (default ``"RK45"``; a ``solve_ivp`` method name or ``OdeSolver``
    subclass, checked on construction), ``rtol`` (1e-8), ``atol`` (1e-10), ``max_evaluations_per_step``
    (the right-hand side's evaluations allowed while the run's time advances by one dt; default
    :data:`EVALUATIONS_PER_STEP`: past it the run stops with a SolverError saying the system is stiff there, where a
    pendulum given its rod twice, as g and g (1 + x²), went on for minutes).
    """

    name = "csm"
    order = 4
    options = {"alpha": 10.0, "method": "RK45", "rtol": 1e-8, "atol": 1e-10,
               "max_evaluations_per_step": EVALUATIONS_PER_STEP}  # fmt: skip

    def __init__(self, system: Any, dt: float, **options: Any) -> None:
        super().__init__(system, dt, **options)
        if not is_number(self.alpha) or not self.alpha >= 0 or not math.isfinite(self.alpha):
            raise ValueError(f"option 'alpha' (Baumgarte rate, 1/s) must be a number >= 0, got {self.alpha!r}")
        for key in ("rtol", "atol"):
            val = getattr(self, key)
            if not is_number(val) or not val > 0 or not math.isfinite(val):
                raise ValueError(f"option {key!r} must be a positive number, got {val!r}")
        from mbvi.integrators.csm import check_method

        self.method = check_method(self.method)
        cap = self.max_evaluations_per_step
        if not is_number(cap) or int(cap) != cap or cap < 1:
            raise ValueError(f"option 'max_evaluations_per_step' must be a positive integer, got {cap!r}")

    def step(self, q: np.ndarray, v: np.ndarray, p: np.ndarray, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One step of ``dt`` (a :class:`mbvi.Simulator` stepping): ``solve_ivp`` over [t, t + dt] alone.

        A run of many steps hands the whole interval to ``solve_ivp`` (:meth:`integrate`), whose own steps then
        need not end at every dt: the two agree to the tolerances ``rtol``/``atol``, not bit for bit.
        """
        _, Q, V, P = self.integrate(np.asarray(q, float), np.asarray(v, float), float(t), 1, 1)
        return Q[-1], V[-1], P[-1]

    def integrate(self, q, v, t0, nsteps, save_every=1, callback=None):
        from scipy.integrate import solve_ivp

        sysm, n = self.system, self.system.nq
        if nsteps == 0:  # no interval for solve_ivp (it returns its y as a list): the start alone
            q0, v0, t_eval = np.asarray(q, float)[None], np.asarray(v, float)[None], np.array([float(t0)])
            return t_eval, q0, v0, sysm.momentum(q0, v0, t_eval)
        from mbvi.engine.runner import check_memory, nsave
        from mbvi.integrators.csm import CSM_ARRAYS

        # before anything runs, as for a scene's csm: solve_ivp's columns and sol.y, q and v, and the momenta
        check_memory((nsave(nsteps, save_every), n), copies=CSM_ARRAYS + 1)
        idx = list(range(0, nsteps + 1, save_every))
        if idx[-1] != nsteps:
            idx.append(nsteps)
        t_eval = t0 + np.asarray(idx, float) * self.dt
        t_eval[-1] = min(t_eval[-1], t0 + nsteps * self.dt)

        budget = int(self.max_evaluations_per_step)
        window = [float(t0), 0]  # where the window of one dt began, the evaluations in it

        def rhs(t: float, y: np.ndarray) -> np.ndarray:
            if t >= window[0] + self.dt:  # the run's time moved on by a step: a new window
                window[:] = [t, 0]
            window[1] += 1
            if window[1] > budget:
                raise _OverBudget(t)
            return np.concatenate([y[n:], constrained_acceleration(sysm, y[:n], y[n:], t, self.alpha)])

        def solve(until: np.ndarray) -> Any:
            return solve_ivp(rhs, (t0, until[-1]), np.concatenate([q, v]), method=self.method, t_eval=until,
                             rtol=self.rtol, atol=self.atol)  # fmt: skip

        try:
            sol = solve(t_eval)
        except _OverBudget as over:  # the samples it passed, solved again (the same steps reach them within it)
            keep = t_eval[t_eval <= over.t]
            window[:] = [float(t0), 0]
            part = solve(keep) if len(keep) > 1 else None
            if part is None or not part.success:
                T, Q, V = t_eval[:1], np.asarray(q, float)[None], np.asarray(v, float)[None]
            else:
                T, Q, V = part.t, part.y.T[:, :n], part.y.T[:, n:]
            err = SolverError(
                f"csm: {budget} right-hand-side evaluations within one step of dt = {self.dt:g} s at t = {over.t:.6g} "
                f"s of {t_eval[-1]:.6g} s — the "
                f"system is stiff there for method {self.method!r} (constraints nearly dependent, or a stiff force); "
                "use method='Radau' or 'BDF', or integrator='midpoint' or 'verlet' (raise the cap with option "
                "max_evaluations_per_step)", time=float(over.t), step=int((over.t - t0) / self.dt),
            )  # fmt: skip
            err.partial = (T, Q, V, sysm.momentum(Q, V, T))
            raise err from None
        except (ValueError, ArithmeticError, np.linalg.LinAlgError) as exc:  # L undefined, M singular where it went
            err = SolverError(
                f"csm: the equations of motion cannot be evaluated along the run ({type(exc).__name__}: {exc}): the "
                "motion leaves the domain of L or M(q) turns singular", time=t0, step=0,
            )  # fmt: skip
            q0, v0 = np.asarray(q, float)[None], np.asarray(v, float)[None]
            err.partial = (t_eval[:1], q0, v0, sysm.momentum(q0, v0, t_eval[:1]))
            raise err from exc
        if callback is not None:
            callback(nsteps)
        Y = sol.y.T
        T = sol.t
        Q, V = Y[:, :n], Y[:, n:]
        P = sysm.momentum(Q, V, T) if len(T) else np.zeros((0, n))
        if not sol.success:
            k = round((float(T[-1]) - t0) / self.dt) if len(T) else 0
            # solve_ivp stalls where the mass matrix turns singular (L = (1 − q²) v²/2 at q = 1): say so
            why = _singular_mass(sysm, Q[-1], V[-1], float(T[-1]), self.dt, ahead=True) if len(T) else None
            err = SolverError(f"csm: solve_ivp failed ({sol.message})" + (f": {why}" if why else ""),
                              time=float(T[-1]) if len(T) else t0, step=k)  # fmt: skip
            err.partial = (T, Q, V, P)
            raise err
        return T, Q, V, P


#: the compiled methods' NumPy steps: a subclass that overrides step runs its own step, in NumPy
_STEPS = {0: _DiscreteLagrangian.step, 1: ImplicitEuler.step}

#: steps per compiled call when a progress callback wants updates
CHUNK = 2000


class Run:
    """A run of a Lagrangian integrator in progress: compiled calls, and the NumPy step for what they hand back.

    Parameters
    ----------
    integrator : LagrangianIntegrator
    q, v, p : ndarray, (n,)
        The state it starts from (stepped in place).
    t0 : float
        When, s.
    nsteps : int or None
        The run's length (None: open-ended, every state saved; :class:`mbvi.Simulator`).
    save_every : int
        Keep every n-th state (and the last).
    out : tuple of ndarray
        ``(Q, V, P)``, (nsave, n) each, the initial state in slot 0.
    """

    def __init__(self, integrator: LagrangianIntegrator, q, v, p, t0: float, nsteps: int | None, save_every: int,
                 out: tuple) -> None:  # fmt: skip
        self.integrator, self.q, self.v, self.p, self.t0 = integrator, q, v, p, t0
        self.nsteps, self.save_every, self.out = nsteps, save_every, out
        self.k, self.j = 0, 1
        self.kernels = integrator.compiled_kernels()
        self.info = np.zeros(3, dtype=np.int64)

    def times(self, count: int) -> np.ndarray:
        """Times of the first ``count`` saved states, s."""
        if self.nsteps is None:
            return self.t0 + np.arange(count) * self.integrator.dt
        k = np.minimum(np.arange(count) * self.save_every, self.nsteps)
        return self.t0 + k * self.integrator.dt

    def _partial(self) -> tuple:
        """The states saved so far, and the failing step's start (the run's state, step :attr:`k`) when it is off
        the save grid (a run saved every n-th state lost up to n − 1 steps of its motion)."""
        j = self.j
        t, Q, V, P = self.times(j), *(a[:j] for a in self.out)
        now = self.t0 + self.k * self.integrator.dt
        if j and now > t[-1]:
            t = np.append(t, now)
            Q, V, P = (np.vstack([a, b[None]]) for a, b in ((Q, self.q), (V, self.v), (P, self.p)))
        return (t, Q, V, P)

    def advance_to(self, kstop: int, callback: Any = None) -> None:
        """Take the steps up to ``kstop``.

        Raises
        ------
        SolverError
            With ``time``/``step`` set and ``partial`` = (t, q, v, p) saved so far; the state stays at the
            failing step's start.
        """
        nsteps = kstop if self.nsteps is None else self.nsteps
        long = self.kernels is not None and kstop - self.k > CHUNK  # called in chunks: Ctrl-C read between them
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"), (
            interrupts.deferred() if long else contextlib.nullcontext()
        ) as interrupt:
            pace = interrupts.Pace(interrupt, CHUNK)
            while self.k < kstop:
                stop = pace.stop(self.k, kstop, callback)
                if self.kernels is not None:
                    kstart = self.k
                    self._compiled(stop, nsteps)
                    pace.took(self.k - kstart)
                    if self.k < stop:  # handed back: the NumPy step takes this one
                        self._numpy_step(nsteps)
                else:
                    while self.k < stop:
                        self._numpy_step(nsteps)
                        if callback is not None:
                            callback(self.k)
                    continue
                pace.check(self.t0 + self.k * self.integrator.dt, self.k, self._partial)
                if callback is not None:
                    callback(self.k)

    def _compiled(self, stop: int, nsteps: int) -> None:
        from mbvi.engine import lagrange

        integ, sysm = self.integrator, self.integrator.system
        nodes = np.asarray(getattr(integ, "nodes", ()), dtype=float)
        weights = np.asarray(getattr(integ, "weights", ()), dtype=float)
        Q, V, P = self.out
        lagrange.run(self.kernels.fns, sysm.nq, sysm.nc, integ.compiled_method, nodes, weights, bool(sysm.quadratic),
                     self.q, self.v, self.p, self.t0, integ.dt, self.k, stop, nsteps, self.save_every, self.j,
                     float(integ.tol), int(integ.maxiter), Q, V, P, self.info)  # fmt: skip
        self.k, self.j = int(self.info[1]), int(self.info[2])

    def _numpy_step(self, nsteps: int) -> None:
        integ = self.integrator
        t = self.t0 + self.k * integ.dt
        try:
            q, v, p = integ.step(self.q, self.v, self.p, t)
            if not (np.isfinite(q).all() and np.isfinite(v).all() and np.isfinite(p).all()):
                raise SolverError(
                    f"integrator {integ.name!r} produced non-finite values (unstable; reduce dt)",
                    suggested_dt=integ.dt / 4,
                )
        except SolverError as exc:
            err = exc.located(t, self.k)
            err.partial = self._partial()
            raise err from exc
        except np.linalg.LinAlgError as exc:
            # a mass matrix singular where the step starts or lands (m(t) = 1 − t at t = 1) says so, as a failed
            # Newton does
            why = _singular_mass(integ.system, self.q, self.v, t, integ.dt)
            message = f"integrator {integ.name!r}: " + (why or f"singular Newton matrix ({exc})")
            err = SolverError(message, time=t, step=self.k)
            err.partial = self._partial()
            raise err from exc
        except (ValueError, ArithmeticError) as exc:  # L or Q undefined where the step went (math domain error …)
            err = SolverError(
                f"integrator {integ.name!r}: the Lagrangian or its force cannot be evaluated where the step went "
                f"({type(exc).__name__}: {exc}; from q = {np.array2string(self.q, precision=4)}): the motion "
                "leaves the domain of L (a square root of a negative number, a log of one …), or dt is too large",
                time=t, step=self.k,
            )  # fmt: skip
            err.partial = self._partial()
            raise err from exc
        self.q[:], self.v[:], self.p[:] = q, v, p
        self.k += 1
        if self.k % self.save_every == 0 or self.k == nsteps:
            Q, V, P = self.out
            Q[self.j], V[self.j], P[self.j] = q, v, p
            self.j += 1


#: integrator name → class, for Lagrangian systems (the same names as for scenes)
INTEGRATORS: dict[str, type[LagrangianIntegrator]] = {
    cls.name: cls for cls in (ExplicitEuler, ImplicitEuler, SymplecticEulerA, SymplecticEulerB, Verlet, Midpoint, CSM)
}
