"""The SHAKE/RATTLE family of variational integrators.

All of them are built from three pieces, solved with one factorization of
A = G M⁻¹ Gᵀ per step (reused by the next step's drift):

* **kick**: v ← v + c M⁻¹ (−∇U + F);
* **constrained drift** (SHAKE): q₁ = q₀ + h (v − M⁻¹ G(q₀)ᵀ Λ) with g(q₁) = 0,
  solved for Λ by Newton (quasi-Newton with A(q₀), full Newton if slow);
* **velocity projection** (RATTLE): v₁ ← v₁ − M⁻¹ G(q₁)ᵀ μ with G(q₁) v₁ = 0.

Forcing follows the discrete Lagrange–d'Alembert principle: the work of the
non-conservative force over a step is split between its two ends and the force
is evaluated at the step's average velocity (q₁ − q₀)/h, which makes the
drift implicit when forces depend on velocity (solved by fixed-point
iteration around SHAKE).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import ClassVar

import numpy as np
import scipy.linalg as sla
import scipy.sparse.linalg as spla

from mbvi.diagnosis import diagnose, drift_failure, stiff_kick
from mbvi.engine import scheme as SC
from mbvi.engine.extrapolation import best_order, extrapolated
from mbvi.engine.fields import WARM_HISTORY, WARM_ROWS
from mbvi.engine.kernels import GOING, SETTLED, settle_mixed
from mbvi.engine.scheme import compose, is_rattle, rows_needed
from mbvi.errors import SolverError
from mbvi.hookspecs import hookimpl
from mbvi.integrators.compiled import Compiled
from mbvi.linalg import Factor
from mbvi.state import State
from mbvi.system import System

#: the compiled loop's fixed-point test with Anderson mixing (mbvi.engine.kernels), run as Python
_settle_mixed = settle_mixed.py_func

__all__ = [
    "Composition", "ShakeRattle", "SymplecticEulerA", "SymplecticEulerB", "Verlet", "Yoshida4", "check_composition",
    "shake",
]  # fmt: skip


def shake(
    system: System,
    q0: np.ndarray,
    v_free: np.ndarray,
    h: float,
    factor0: Factor,
    gdata0: np.ndarray,
    maxiter: int = 60,
    multipliers: np.ndarray | None = None,
    tol: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Constrained drift: find Λ with q₁ = q₀ + h (v_free − M⁻¹ G(q₀)ᵀ Λ), g(q₁) = 0.

    Parameters
    ----------
    system : System
    q0 : ndarray, shape (nq,)
        Start configuration (on the constraints).
    v_free : ndarray, shape (nq,)
        Unconstrained drift velocity.
    h : float
        Drift duration, s.
    factor0, gdata0
        ``system.factor(q0)``.
    maxiter : int, default: 60
        Newton iterations.
    multipliers : ndarray, shape (len(system.active),), optional
        Initial guess for Λ (e.g. the previous step's), updated in place with
        the converged Λ (units: kg m, the drift's impulse times h).
    tol : float, optional
        Relative constraint tolerance (default ``system.tolerance``, 1e-12).

    Returns
    -------
    q1, v_half : ndarray, shape (nq,)
        End configuration and the constrained drift velocity (q₁ − q₀)/h.

    Raises
    ------
    SolverError
        When Newton does not converge (with the culprit and a suggested dt).
    """
    W = system.inv_mass
    q = q0 + h * v_free
    if len(system.active) == 0:
        return q, v_free
    lam = np.zeros(len(system.active)) if multipliers is None else multipliers.copy()
    corr = W * system.G_rmatvec(gdata0, lam)
    q -= corr
    tol = system.tolerance if tol is None else tol
    prev = np.inf
    slow = 0
    for _ in range(maxiter):
        g = system.active_constraints(q)
        r = system.residual(g)
        if not np.isfinite(r):
            break
        slow = slow + 1 if r > 0.25 * prev else 0
        prev = r
        if r <= tol or (slow >= 2 and system.residual_at(q, g) <= tol):  # or stalled at the round-off of here
            if multipliers is not None:
                multipliers[:] = lam
            return q, v_free - corr / h
        if slow >= 3:
            if multipliers is not None:
                multipliers[:] = 0.0
            return _shake_newton(system, q0, q, corr, v_free, h, gdata0, maxiter, tol)
        dl = factor0.solve(g)
        lam += dl
        dq = W * system.G_rmatvec(gdata0, dl)
        q -= dq
        corr += dq
    culprit, dt_hint = diagnose(system, q0, v_free, h, system.active_constraints(q))
    raise SolverError("SHAKE (constrained drift) did not converge", culprit=culprit, suggested_dt=dt_hint)


def predict_multipliers(lam: np.ndarray, hist: np.ndarray) -> None:
    """Warm start of the next SHAKE, in place: lam ← the multipliers extrapolated from the last steps.

    ``lam`` (n,) holds the last step's multipliers (all zero: none, a cold
    start), ``hist`` (4, n) those of the four steps before, newest first (a
    NaN row: unknown); hist is shifted to take lam. The order of the
    extrapolating polynomial (0 … 3) is the one that best predicted lam from
    the steps before (max norm); linear while the history is too short to
    compare. A smooth motion's multipliers are then missed by O(h⁴) instead
    of O(h²) (linear): a 32-link rigid chain takes two constrained drifts a
    step instead of 2.75. The compiled twin, with the same operations, is
    :func:`mbvi.engine.kernels.predict_multipliers`.
    """
    cold = not np.any(lam)
    now = lam.copy()
    known = 0
    if not cold and len(lam):
        while known < 4 and not np.isnan(hist[known, 0]):
            known += 1
    e = [0.0] * 4
    if known >= 2:  # the misses as the compiled twin takes them: max norm, ignoring NaN as its max() does
        e = [float(np.fmax.reduce(np.abs(now - extrapolated(k, hist[0], hist[1], hist[2], hist[3])), initial=0.0))
             for k in range(4)]  # fmt: skip
    lam[:] = extrapolated(best_order(known, *e), now, hist[0], hist[1], hist[2])
    hist[1:] = hist[:-1].copy()
    hist[0] = now
    if cold:
        hist[:] = np.nan


def _shake_newton(system, q0, q, corr, v_free, h, gdata0, maxiter, tol):
    """Full Newton on Λ with the unsymmetric Jacobian G(q) M⁻¹ G(q₀)ᵀ."""
    W = system.inv_mass
    G0 = system.active_jacobian(gdata0)
    for it in range(maxiter):
        g, data = system.active_values_and_jacobian(q)
        r = system.residual(g)
        if r <= tol or (it >= 2 and system.residual_at(q, g) <= tol):
            return q, v_free - corr / h
        if not np.isfinite(r):
            break
        J = system.active_jacobian(data).multiply(W) @ G0.T
        try:
            if J.shape[0] <= 300:
                dl = sla.lstsq(J.toarray(), g, check_finite=False)[0]
            else:
                dl = spla.splu(J.tocsc()).solve(g)
        except (RuntimeError, ValueError, np.linalg.LinAlgError):
            break
        dq = W * system.G_rmatvec(gdata0, dl)
        q = q - dq
        corr = corr + dq
    culprit, dt_hint = diagnose(system, q0, v_free, h, system.active_constraints(q))
    raise SolverError("SHAKE (constrained drift) did not converge", culprit=culprit, suggested_dt=dt_hint)


class ShakeRattle(Compiled):
    """The SHAKE/RATTLE family: a scheme of RATTLE substeps (abstract; :mod:`mbvi.engine.scheme`).

    A run is one compiled call (:mod:`mbvi.engine`); the NumPy :meth:`step`
    interprets the same scheme (the steps the engine hands back, and systems it
    does not run). A substep kicks a0·h_s at q₀, drifts h_s on the constraints
    (SHAKE), kicks a1·h_s at q₁ and projects the velocity (RATTLE).

    Options
    -------
    tol : float, default: 1e-12
        Relative constraint tolerance (``max |g| / scale``).
    maxiter : int, default: 60
        Newton iterations per solve.
    max_turn : float, default: 0.1
        Rigid bodies, compiled path: once a body would turn by more than this
        in a step (h|ω|, rad), every step from then on is taken as 2, 4, …
        equal substeps, enough for it (the count only grows over a run, so
        each step stays one symplectic map; the run still reports every dt);
        ``math.inf`` turns the refinement off. The rotation update steps at any
        spin (:mod:`mbvi.engine.rotation`): this bounds the error, not the
        existence of a step.
    """

    variational = True
    symplectic = True
    #: the method is its own adjoint (Φ_{−h} = Φ_h⁻¹): only odd powers of h in its error (a composition's order)
    symmetric: ClassVar[bool] = False
    compiled = True
    handles = frozenset({"constraints", "forces"})
    options = {"tol": 1e-12, "maxiter": 60, "max_turn": 0.1}

    def __init__(self, system: System, dt: float, **options) -> None:
        super().__init__(system, dt, **options)
        self.tol = self.check_option("tol", self.tol)
        self.maxiter = self.check_option("maxiter", self.maxiter, integer=True)
        if self.max_turn != math.inf:  # inf: never refine
            self.max_turn = self.check_option("max_turn", self.max_turn)
        self._cache: dict = {"q": None}
        # SHAKE warm starts of the NumPy step, by the scheme's rows (row 0 also the extrapolation's newest,
        # rows 2 … 5 the four steps' before it: predict_multipliers)
        self._lam = np.zeros((rows_needed(self.method()), len(system.active)))

    # -- NumPy path ------------------------------------------------------------------------------
    def _factor_at(self, q: np.ndarray) -> tuple[Factor, np.ndarray]:
        c = self._cache
        if c["q"] is q:
            return c["factor"], c["gdata"]
        factor, gdata = self.system.factor(q)
        c.update(q=q, factor=factor, gdata=gdata, grad=None)
        return factor, gdata

    def _gradient_at(self, q: np.ndarray) -> np.ndarray:
        c = self._cache
        if c["q"] is q and c.get("grad") is not None:
            return c["grad"]
        grad = self.system.potential_gradient(q)
        if c["q"] is q:
            c["grad"] = grad
        return grad

    def _forced_drift(self, q0, v0, base_kick, c, h, t, factor0, gdata0, lam):
        """Drift with a kick ``c`` M⁻¹ F(q₀, v½, t) evaluated at the (unknown) drift velocity v½."""
        sysm = self.system
        W = sysm.inv_mass
        args = (self.maxiter, lam, self.tol)
        if not sysm.has_forces:
            return shake(sysm, q0, v0 + base_kick, h, factor0, gdata0, *args)
        if not sysm.has_velocity_forces:
            return shake(sysm, q0, v0 + base_kick + c * W * sysm.force(q0, v0, t), h, factor0, gdata0, *args)
        vh = np.array(v0, dtype=float)
        gprev, rprev = np.zeros_like(vh), np.zeros_like(vh)  # the mixing's history (the compiled loop's rule)
        mixing = 0 if h > 0.0 else -1
        # SHAKE returns v½ only to ~ tol·L/h: a stricter test can cycle forever on that noise
        floor = 10.0 * self.tol * sysm.length_scale / abs(h) if len(sysm.active) else 0.0
        prev = np.inf
        for it in range(100):
            kick = base_kick + c * W * sysm.force(q0, vh, t)
            if it == 0:  # the round-off of the iterate's terms, v₀ and its kick (the compiled loop's sum_roundoff)
                floor += 1e-13 * max(float(np.max(np.abs(v0), initial=0.0)), float(np.max(np.abs(kick), initial=0.0)))
            try:
                q1, vnew = shake(sysm, q0, v0 + kick, h, factor0, gdata0, self.maxiter, tol=self.tol)
            except SolverError:
                if it == 0 and not stiff_kick(sysm, q0, vh, t, h):  # at the first iterate (v½ = v₀) SHAKE itself
                    raise  # fails, as it would with no such force (unless the damping's own kick threw it off)
                break  # the fixed point ran away before SHAKE could follow
            # the compiled loop's test and Anderson mixing, the same code run as Python (vh ← the next iterate)
            outcome, prev, mixing = _settle_mixed(np.asarray(vnew, dtype=float), vh, gprev, rprev, floor, it, prev,
                                                  mixing)  # fmt: skip
            if outcome == SETTLED:
                return q1, vh
            if outcome != GOING:
                break  # stiff damping: the fixed point diverges or contracts too slowly even mixed
        raise drift_failure(sysm, self.name, q0, v0, t, 0, self.dt)  # (located by the run)

    def _substep(self, state: State, t: float, h: float, c0: float, c1: float, lam: np.ndarray) -> State:
        """Kick c₀ at q₀, constrained drift h, kick c₁ at q₁, velocity projection (one RATTLE-family stage)."""
        sysm = self.system
        W = sysm.inv_mass
        q0, v0 = state.q, state.v
        factor0, gdata0 = self._factor_at(q0)
        if c0:
            q1, vh = self._forced_drift(q0, v0, -c0 * W * self._gradient_at(q0), c0, h, t, factor0, gdata0, lam)
        else:
            q1, vh = shake(sysm, q0, v0, h, factor0, gdata0, self.maxiter, lam, self.tol)
        grad1 = sysm.potential_gradient(q1) if c1 else None
        v1 = vh
        if c1:
            f1 = -grad1
            if sysm.has_forces:
                f1 = f1 + sysm.force(q1, vh, t + h)
            v1 = vh + c1 * W * f1
        factor1, gdata1 = sysm.factor(q1)
        v1 = sysm.project_velocity(q1, v1, factor1, gdata1)
        self._cache.update(q=q1, factor=factor1, gdata=gdata1, grad=grad1)
        return State(q1, v1)

    def _step(self, state: State, t: float) -> State:
        """One step: the scheme's stages in order (the operations of the compiled step)."""
        scheme = self.method()
        if len(scheme) == 1 and not self.system.has_velocity_forces:  # the drift starts from extrapolated multipliers
            predict_multipliers(self._lam[0], self._lam[WARM_HISTORY:WARM_ROWS])
        ts = t
        for _kind, w, a0, a1, row in scheme:
            hs = w * self.dt
            state = self._substep(state, ts, hs, a0 * hs, a1 * hs, self._lam[int(row)])
            ts = ts + hs
        return state


class Verlet(ShakeRattle):
    """Störmer–Verlet with constraints (RATTLE): the trapezoidal discrete Lagrangian.

    Second order, symplectic, symmetric; conserves momentum maps exactly and
    keeps g(q) = 0 and G(q) v = 0 to solver tolerance at every step.
    """

    name = "verlet"
    order = 2
    symmetric = True
    scheme = SC.VERLET


class SymplecticEulerA(ShakeRattle):
    """Symplectic Euler A (kick, then constrained drift): rectangle rule with U at q_k.

    First order. Hairer–Lubich–Wanner's first symplectic Euler variant for
    separable Hamiltonians — the semi-implicit Euler of MuJoCo and Pinocchio,
    here with exact constraints.
    """

    name = "symplectic_euler_a"
    order = 1
    scheme = SC.SYMPLECTIC_EULER_A


class SymplecticEulerB(ShakeRattle):
    """Symplectic Euler B (constrained drift, then kick): rectangle rule with U at q_{k+1}.

    First order; the adjoint of :class:`SymplecticEulerA`.
    """

    name = "symplectic_euler_b"
    order = 1
    scheme = SC.SYMPLECTIC_EULER_B


class Composition(ShakeRattle):
    """A symmetric composition of a RATTLE-family method, declared as data (abstract).

    Φ_h = φ_{w_m h} ∘ … ∘ φ_{w_1 h}: the base method φ taken with steps of
    fractions ``weights`` of the step, in order. A composition of a symmetric
    method of even order with symmetric weights chosen as in Yoshida (1990),
    Forest & Ruth (1990), Kahan & Li (1997) or McLachlan (1995) raises its
    order; it stays symplectic and variational, and runs in the compiled loop,
    serial and batched, like its base.

    Class attributes
    ----------------
    name : str
        Registered name.
    order : int
        The order it promises (the test suite measures it).
    base : str
        A registered member of the RATTLE family (``"verlet"``, ``"symplectic_euler_a"``, another
        composition …).
    weights : tuple of float
        Fractions of the step, summing to 1 (negative ones allowed).

    Examples
    --------
    >>> import mbvi
    >>> class ForestRuth(mbvi.Composition):
    ...     name = "forest_ruth"
    ...     order = 4
    ...     base = "verlet"
    ...     theta = 1 / (2 - 2 ** (1 / 3))
    ...     weights = (theta, 1 - 2 * theta, theta)
    """

    base: ClassVar[str] = "verlet"
    weights: ClassVar[tuple[float, ...]] = ()

    @classmethod
    def bind(cls, lookup: Callable[[str], type]) -> np.ndarray:
        """Check the weights and the base (found by name with ``lookup``) and fix the class's scheme.

        The registry binds every registered composition (:mod:`mbvi.plugins`), and :func:`mbvi.simulate`
        one passed as a class.

        Raises
        ------
        ValueError
            Weights that do not sum to 1 (or are not finite numbers), or a base that is not a registered
            member of the RATTLE family, naming the class.
        """
        base = check_composition(cls, lookup)
        w = [float(x) for x in cls.weights]  # the numbers checked (strings or Decimals from a file, arrays …)
        cls.scheme = compose(base.method(), tuple(w))
        cls.symmetric = bool(base.symmetric) and palindrome(w)
        cls._bound_to = _declared(cls)
        cls._bound_base, cls._base_scheme = base, base.method()
        return cls.scheme

    @classmethod
    def bound(cls) -> bool:
        """Whether :meth:`bind` fixed the scheme from the weights, base and order the class declares now, and
        from its base's scheme as it is now (a composition whose base, itself a composition, was changed and bound
        again): a class changed after it was bound, in a notebook, is bound again when given to a run."""
        if cls.__dict__.get("scheme") is None or cls.__dict__.get("_bound_to") != _declared(cls):
            return False
        base = cls.__dict__.get("_bound_base")
        if isinstance(base, type) and issubclass(base, Composition):
            return base.bound() and base.__dict__.get("scheme") is cls.__dict__.get("_base_scheme")
        return True

    @classmethod
    def method(cls) -> np.ndarray:
        """The composed scheme (:func:`mbvi.engine.scheme.compose` of the base's), once :meth:`bind` has fixed it."""
        scheme = cls.__dict__.get("scheme")
        if scheme is None:
            raise ValueError(
                f"composition {cls.__qualname__} is not bound to its base {cls.base!r}: register it "
                "(mbvi.plugins.register_plugin) or pass the class to mbvi.simulate"
            )
        if not cls.bound():
            raise ValueError(
                f"composition {cls.__qualname__}: its weights, base or order, or its base's, changed after it was "
                "bound; pass the class to mbvi.simulate (which binds it again, checking them) or register it again"
            )
        return scheme


def _declared(cls: type) -> tuple:
    """What a composition's scheme is made from, as the class declares it now."""
    try:
        weights = tuple(cls.weights)
    except TypeError:
        weights = cls.weights
    return (weights, cls.base, cls.order)


def check_composition(cls: type, lookup: Callable[[str], type]) -> type[ShakeRattle]:
    """The base class of composition ``cls``, after checking its weights and base (ValueError naming ``cls``)."""
    label = f"composition {cls.__qualname__}"
    w = cls.weights
    if isinstance(w, (str, bytes)) or not hasattr(w, "__len__"):  # a generator would be spent by this check
        raise ValueError(f"{label}: weights must be a tuple of numbers, got {w!r}")
    try:
        values = [float(x) for x in w]
    except (TypeError, ValueError):
        raise ValueError(f"{label}: weights must be numbers, got {w!r}") from None
    if not values or not all(math.isfinite(x) for x in values):
        raise ValueError(f"{label}: weights must be finite numbers, got {w!r}")
    if abs(math.fsum(values) - 1.0) > 1e-12:
        raise ValueError(f"{label}: weights must sum to 1 (fractions of the step), they sum to {math.fsum(values)!r}")
    if not isinstance(cls.base, str):
        raise ValueError(f"{label}: base must be the name of a registered integrator, got {cls.base!r}")
    if any(x == 0.0 for x in values):
        raise ValueError(f"{label}: weights must not be zero (a substep of no length), got {w!r}")
    try:
        base = lookup(cls.base)
    except ValueError as exc:
        if "unknown integrator" in str(exc):
            raise ValueError(f"{label}: base {cls.base!r} is not a registered integrator") from None
        raise ValueError(f"{label}: base {cls.base!r} cannot be used: {exc}") from None
    if base is cls or not (isinstance(base, type) and issubclass(base, ShakeRattle)) or not is_rattle(base.method()):
        raise ValueError(f"{label}: base {cls.base!r} is not a member of the RATTLE family (verlet, "
                         "symplectic_euler_a/_b or a composition of them)")  # fmt: skip
    if not base.compiled:  # a subclass that writes its own step: the scheme it inherits is not what it takes
        raise ValueError(f"{label}: base {cls.base!r} takes a step of its own ({base.__qualname__} writes step or "
                         "_step); a composition composes the engine's scheme of a RATTLE-family method, which it "
                         "would not take")  # fmt: skip
    _check_order(label, cls, base, values)
    return base


def palindrome(weights: Sequence[float]) -> bool:
    """Whether a composition's weights are the same read backwards (to 1e-12 relative: weights computed twice may
    differ in their last digits): with a symmetric base, a symmetric composition."""
    w = [float(x) for x in weights]
    return all(abs(a - b) <= 1e-12 * max(abs(a), abs(b)) for a, b in zip(w, w[::-1], strict=True))


def _check_order(label: str, cls: type, base: type, weights: list[float]) -> None:
    """The order a composition declares against the conditions its weights must meet (ValueError when not).

    The local error of a base of order p is C h^(p+1) + O(h^(p+2)); composed, the leading terms add up to
    Σ wᵢ^(p+1) C h^(p+1), so order p + 1 needs Σ wᵢ^(p+1) = 0 — impossible when p + 1 is even. A symmetric
    base has only odd powers in its error, so order q needs Σ wᵢ^k = 0 for every odd k from p + 1 to q
    (necessary; the further conditions of order 6 and beyond are not checked). The odd k = q itself counts: order 3
    from two steps of verlet weighted 0.3 and 0.7 (Σ wᵢ³ ≠ 0, measured order 2) was accepted, as was order 5 from
    Forest–Ruth's weights (measured 4). Only odd powers are in the error when the composition is symmetric too
    (its weights the same read backwards): beyond p + 1 weights that are not leave an h^(p+2) term of commutators,
    and (1.2, 1.596, −1.796) declared order 4 (Σ wᵢ = 1, Σ wᵢ³ = 0) measured 3.
    """
    p, q = int(base.order), int(cls.order)
    if q <= p:
        return
    if q > p + 1 and not (base.symmetric and palindrome(weights)):
        base_kind = f"order {p}" if base.symmetric else f"order {p}, not symmetric"
        what = "weights that are not symmetric (the same read backwards)" if base.symmetric else "any weights"
        raise ValueError(
            f"{label}: declares order {q}, but a composition of {cls.base!r} ({base_kind}) with {what} has order "
            f"at most {p + 1}: past it the error keeps an h^{p + 2} term"
        )
    powers = range(p + 1, q + 1, 2) if base.symmetric else [p + 1]
    for k in powers:
        total = math.fsum(x**k for x in weights)
        if k % 2 == 0 or abs(total) > 1e-10 * math.fsum(abs(x) ** k for x in weights):
            reached = k - 1 if base.symmetric else p
            why = (f"Σ wᵢ^{k} = {total:.3g}, not 0" if k % 2
                   else f"order {p + 1} would need Σ wᵢ^{k} = 0, which no real weights give")  # fmt: skip
            raise ValueError(
                f"{label}: declares order {q}, but a composition of {cls.base!r} (order {p}) with these weights "
                f"has order at most {reached}: {why}"
            )


class Yoshida4(Composition):
    """Fourth-order variational integrator: Yoshida's triple-jump composition of RATTLE.

    Steps of γ₁h, γ₂h, γ₁h with γ₁ = 1/(2 − 2^{1/3}), γ₂ = 1 − 2γ₁ (< 0).
    Symplectic and symmetric; one RATTLE solve per substep (the outer and the
    inner substeps keep their own SHAKE warm starts).
    """

    name = "yoshida4"
    order = 4
    base = "verlet"
    weights = SC.triple_jump(2)


@hookimpl
def register_integrators(register):
    """Register the SHAKE/RATTLE family."""
    for cls in (Verlet, SymplecticEulerA, SymplecticEulerB, Yoshida4):
        register(cls)
