"""Symbolic derivation: everything the integrators need from L, g and Q, derived once and lambdified.

The functions built here take NumPy arrays ``q``, ``v`` (shape (n,)) and a
float ``t`` and return floats or arrays; they know nothing of integrators.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Derived", "NoNumericForm", "derivatives", "derive"]


class NoNumericForm(ValueError):
    """An expression of L has no numerical form (a function neither math, NumPy nor SciPy defines)."""


@dataclass(frozen=True)
class Derived:
    """Numerical functions derived from a Lagrangian (built by :func:`derive`).

    Attributes
    ----------
    point : callable (q, v, t) -> tuple
        ``(L, L_q, L_v, L_qq, L_qv, L_vv)`` at one point: the Lagrangian, its
        gradients (n,) and Hessians (n, n); ``L_qv[i, j] = ∂²L/∂q_i∂v_j``.
    force : callable (q, v, t) -> tuple or None
        ``(Q, Q_q, Q_v)``: the generalized force (n,) and its Jacobians (n, n);
        None without a force.
    constraint : callable (q, lam) -> tuple or None
        ``(g, G, H)``: values (m,), Jacobian (m, n) and ``H = Σ_k λ_k ∇²g_k`` (n, n).
    curvature : callable (q, v) -> ndarray or None
        ``γ = (∂(G v)/∂q) v``, shape (m,): the velocity part of g̈ = G a + γ.
    scalar : dict of str -> callable (q, v, t) -> ndarray
        ``"lagrangian"``, ``"energy"``, ``"potential"`` (−L(q, 0)) and, for a forced or time-dependent
        system, ``"power"`` (dE/dt = Q·v − ∂L/∂t, W), vectorized:
        ``q``, ``v`` of shape (n, k) (one column per state) give shape (k,).
    momentum : list of callable (q, v, t) -> ndarray
        Components of p = ∂L/∂v, vectorized like ``scalar``.
    explicit_time : callable (q, v, t) -> ndarray or None
        ∂²L/∂v∂t, shape (n,) (None when L does not depend on t explicitly).
    mass_exprs : tuple of sympy.Expr
        Entries of ∂²L/∂v² (row-major).
    exprs : dict of str to sympy objects
        The derivatives themselves (``"L"``, ``"Lq"``, ``"Lv"``, ``"Lqq"``, ``"Lqv"``, ``"Lvv"``; ``"Q"``,
        ``"Qq"``, ``"Qv"`` with a force; ``"g"``, ``"G"``, ``"H"`` and the multipliers ``"mu"`` with constraints)
        and the symbols ``"q"``, ``"v"``, ``"t"``: what :mod:`mbvi.lagrangian.codegen` compiles.
    constraint_rows : list of callable (q, v, t) -> ndarray
        Each constraint g_k, vectorized like ``scalar`` (v and t unused).
    """

    point: Callable[..., tuple]
    force: Callable[..., tuple] | None
    constraint: Callable[..., tuple] | None
    curvature: Callable[..., np.ndarray] | None
    scalar: dict[str, Callable[..., Any]]
    momentum: list[Callable[..., Any]]
    explicit_time: Callable[..., tuple] | None = None
    mass_exprs: tuple = ()
    exprs: dict = field(default_factory=dict)
    constraint_rows: list = field(default_factory=list)


def _arrays(args: list[Any], exprs: Sequence[Any], shapes: Sequence[tuple[int, ...]]) -> Callable[..., tuple]:
    """Lambdify several (matrix) expressions into one function returning a tuple of float arrays.

    All entries are computed in one flat list (scalar ``math`` functions, one
    common-subexpression pass) and split into views of the given shapes: a
    call costs a few microseconds for the small systems written by hand.
    """
    import sympy as sp

    flat: list[Any] = []
    for e in exprs:
        flat.extend(list(e) if isinstance(e, sp.MatrixBase) else [e])
    func = _lambdify(args, flat, SCALAR_MODULES)
    sizes = [int(np.prod(s)) for s in shapes]
    bounds = np.cumsum([0, *sizes])
    pieces = [(int(a), int(b), s) for a, b, s in zip(bounds[:-1], bounds[1:], shapes, strict=True)]

    def wrapped(*a: Any) -> tuple:
        try:
            out = np.array(func(*a), dtype=float)
        except NameError as exc:
            raise NoNumericForm(f"LagrangianSystem: {_no_numeric_form(exc)}") from None
        return tuple(out[i] if s == () else out[i:j].reshape(s) for i, j, s in pieces)

    return wrapped


def derive(
    L: Any, q: Sequence[Any], v: Sequence[Any], t: Any, constraints: Sequence[Any], force: Sequence[Any] | None
) -> Derived:
    """Differentiate and lambdify (NumPy, with common-subexpression elimination).

    Parameters
    ----------
    L : sympy.Expr
        The Lagrangian (parameters already substituted), J.
    q, v : sequence of sympy.Symbol
        Coordinates and velocities, n each.
    t : sympy.Symbol
        Time.
    constraints : sequence of sympy.Expr
        Holonomic constraints g(q) = 0, m of them.
    force : sequence of sympy.Expr or None
        Generalized force Q(q, v, t), n of them.

    Returns
    -------
    Derived
    """
    import sympy as sp

    exprs = derivatives(L, q, v, t, constraints, force)
    q, v, t, L, Lq, Lv = exprs["q"], exprs["v"], exprs["t"], exprs["L"], exprs["Lq"], exprs["Lv"]
    n = len(q)
    vv = sp.Matrix(v)
    args = [list(q), list(v), t]
    point = _arrays(args, [L, Lq, Lv, exprs["Lqq"], exprs["Lqv"], exprs["Lvv"]],
                    [(), (n,), (n,), (n, n), (n, n), (n, n)])  # fmt: skip
    force_f = None
    if "Q" in exprs:
        force_f = _arrays(args, [exprs["Q"], exprs["Qq"], exprs["Qv"]], [(n,), (n, n), (n, n)])
    constraint_f = curvature_f = None
    rows: list = []
    if "g" in exprs:
        g, G, mu = exprs["g"], exprs["G"], exprs["mu"]
        m = len(mu)
        constraint_f = _arrays([list(q), list(mu)], [g, G, exprs["H"]], [(m,), (m, n), (n, n)])
        gamma = _kinks((G * vv).jacobian(sp.Matrix(q)) * vv)
        curvature_f = _arrays([list(q), list(v)], [gamma], [(m,)])
        rows = [_vectorized(_lambdify(args, e, ARRAY_MODULES)) for e in g]
    zero_v = {s: 0 for s in v}
    energy = (Lv.T * vv)[0, 0] - L
    scalar = {
        "lagrangian": _vectorized(_lambdify(args, L, ARRAY_MODULES)),
        "energy": _vectorized(_lambdify(args, energy, ARRAY_MODULES)),
        "potential": _vectorized(_lambdify(args, -L.subs(zero_v), ARRAY_MODULES)),
    }
    # dE/dt = Q·v − ∂L/∂t: the power the run's energy balance integrates (forced or time-dependent systems)
    power = -_kinks(sp.Matrix([L.diff(t)]))[0, 0]
    if "Q" in exprs:
        power = power + (exprs["Q"].T * vv)[0, 0]
    if power != 0:
        scalar["power"] = _vectorized(_lambdify(args, power, ARRAY_MODULES))
    momentum = [_vectorized(_lambdify(args, Lv[i], ARRAY_MODULES)) for i in range(n)]
    Lvt = _kinks(Lv.diff(t))
    time_f = None if all(e == 0 for e in Lvt) else _arrays(args, [Lvt], [(n,)])
    return Derived(point, force_f, constraint_f, curvature_f, scalar, momentum, time_f, tuple(exprs["Lvv"]), exprs,
                   rows)  # fmt: skip


def derivatives(
    L: Any,
    q: Sequence[Any],
    v: Sequence[Any],
    t: Any,
    constraints: Sequence[Any],
    force: Sequence[Any] | None,
    parameters: Sequence[Any] = (),
) -> dict:
    """The derivatives the integrators evaluate, as sympy expressions (:attr:`Derived.exprs`): L, ∂L/∂q, ∂L/∂v
    and the three Hessians; Q and its Jacobians with a force; g, G = ∂g/∂q and H = ∇²(λ·g) in multipliers
    ``"mu"`` with constraints; and the symbols ``"q"``, ``"v"``, ``"t"`` they are written in, and ``"p"`` for the
    ``parameters`` left symbolic (:mod:`mbvi.lagrangian.codegen`), all real and renamed."""
    import sympy as sp

    # the coordinates, velocities, time and parameters are real: d|x|/dx is sign(x), not an expression in re(x)
    # and im(x) that cannot be printed; and named apart from every function the numerical forms call (a coordinate
    # named cos shadowed math.cos)
    p = list(parameters)
    names = [*(f"_q{i}" for i in range(len(q))), *(f"_v{i}" for i in range(len(v))), "_t",
             *(f"_p{i}" for i in range(len(p)))]  # fmt: skip
    real = {s: sp.Symbol(name, **(s.assumptions0 if s.is_real else {"real": True}))  # (a positive r stays so)
            for s, name in zip([*q, *v, t, *p], names, strict=True)}
    L = L.subs(real)
    constraints = [sp.sympify(e).subs(real) for e in constraints]
    force = None if force is None else [sp.sympify(e).subs(real) for e in force]
    q, v, t, p = [real[s] for s in q], [real[s] for s in v], real[t], [real[s] for s in p]
    qv, vv = sp.Matrix(q), sp.Matrix(v)
    Lq = _kinks(sp.Matrix([L]).jacobian(qv).T)
    Lv = _kinks(sp.Matrix([L]).jacobian(vv).T)
    exprs: dict = {"q": q, "v": v, "t": t, "p": p, "L": L, "Lq": Lq, "Lv": Lv, "Lqq": _kinks(Lq.jacobian(qv)),
                   "Lqv": _kinks(Lq.jacobian(vv)), "Lvv": _kinks(Lv.jacobian(vv))}  # fmt: skip
    if force is not None:
        Q = sp.Matrix(force)
        exprs.update(Q=Q, Qq=_kinks(Q.jacobian(qv)), Qv=_kinks(Q.jacobian(vv)))
    m = len(constraints)
    if m:
        g = sp.Matrix(constraints)
        G = _kinks(g.jacobian(qv))
        mu = sp.symbols(f"_lambda0:{m}", real=True)
        exprs.update(g=g, G=G, H=_kinks((G.T * sp.Matrix(mu)).jacobian(qv)), mu=list(mu))
    return exprs


#: lambdify's namespaces: a point's scalar derivatives take ``math`` first (a call costs microseconds); SciPy's
#: special functions (erf, Bessel, gamma's polygamma, Fresnel, elliptic, zeta …) for what neither math nor
#: NumPy has, and for arrays (math.erf on an array failed, "only 0-dimensional arrays can be converted")
SCALAR_MODULES = ["math", "scipy", "numpy"]
ARRAY_MODULES = ["scipy", "numpy"]


def _lambdify(args: Any, expr: Any, modules: Any) -> Callable[..., Any]:
    """sympy.lambdify with common-subexpression elimination; ValueError naming a function that has no numerical
    form (sympy cannot print it, or prints a name no namespace defines: a user's sympy Function)."""
    import sympy as sp

    try:
        return sp.lambdify(args, expr, modules=modules, cse=True)
    except Exception as exc:  # sympy's PrintMethodNotImplementedError and kin
        raise NoNumericForm(f"LagrangianSystem: {_no_numeric_form(exc)}") from None


def _no_numeric_form(exc: BaseException) -> str:
    what = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return (
        f"an expression has no numerical form ({what}): write L with functions math, NumPy or SciPy define "
        "(a function of your own written out in sympy's, which mbvi differentiates twice)"
    )


def _kinks(M: Any) -> Any:
    """M with the Dirac deltas of differentiated kinks (|x|, sign(x), Heaviside) set to 0: the derivative away
    from the kink, which is where a step evaluates it (almost surely)."""
    import sympy as sp

    return M.applyfunc(lambda e: e.replace(sp.DiracDelta, lambda *a: sp.S.Zero))


def _vectorized(func: Callable[..., Any]) -> Callable[..., np.ndarray]:
    """A scalar lambdified function of (q, v, t) evaluated on columns: q, v of shape (n, k) → (k,)."""

    def wrapped(q: np.ndarray, v: np.ndarray, t: Any) -> np.ndarray:
        k = np.shape(q)[1]
        try:
            with np.errstate(all="ignore"):
                out = func(list(q), list(v), t)
        except NameError as exc:
            raise NoNumericForm(f"LagrangianSystem: {_no_numeric_form(exc)}") from None
        return np.broadcast_to(np.asarray(out, dtype=float), (k,)).copy()

    return wrapped
