"""LagrangianSystem: mechanics in the user's own generalized coordinates, from a sympy Lagrangian."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from mbvi import notices
from mbvi.errors import ConstraintWarning
from mbvi.lagrangian.derive import NoNumericForm
from mbvi.state import State, real_array

__all__ = ["LagrangianSystem"]

#: relative size of a velocity correction onto the constraints that is reported
_WARN_CORRECTION = 1e-9


def _symbols(items: Any, what: str) -> list[Any]:
    import sympy as sp

    if isinstance(items, (sp.Basic, str)) or not isinstance(items, Sequence | np.ndarray):
        items = [items]
    out = []
    for s in items:
        s = sp.Symbol(s) if isinstance(s, str) else s
        if not isinstance(s, sp.Symbol):
            raise ValueError(f"LagrangianSystem: every one of the {what} must be a sympy Symbol, got {s!r}")
        out.append(s)
    return out


def _expressions(items: Any, what: str) -> list[Any]:
    import sympy as sp

    if items is None:
        return []
    if isinstance(items, sp.MatrixBase):
        items = list(items)
    elif isinstance(items, (sp.Basic, str, int, float)):
        items = [items]
    elif callable(items) or not hasattr(items, "__iter__"):  # L as a Python function of (q, v): not iterable
        raise ValueError(f"LagrangianSystem: {what} must be a sympy expression (or a list of them), got {items!r}")
    out = []
    for e in items:
        try:
            x = sp.sympify(e)
        except (sp.SympifyError, TypeError) as exc:
            raise ValueError(f"LagrangianSystem: {what} {e!r} is not a sympy expression") from exc
        if what == "constraint" and isinstance(x, sp.Equality):  # Eq(x² + y², l²): the constraint lhs − rhs = 0
            x = x.lhs - x.rhs
        if not isinstance(x, sp.Expr):
            kind = "an equation or inequality" if isinstance(x, sp.core.relational.Relational) else type(x).__name__
            hint = " (a constraint may be an equation Eq(lhs, rhs))" if what == "constraint" else ""
            raise ValueError(f"LagrangianSystem: {what} {x} is {kind}, not an expression{hint}")
        if x.has(sp.zoo, sp.nan, sp.oo, -sp.oo):
            raise ValueError(f"LagrangianSystem: {what} {x} has an infinity or NaN in it (zoo, oo or nan: a division "
                             "by zero in the expression?)")  # fmt: skip
        out.append(x)
    return out


#: a coordinate named as an angle (for one the Lagrangian does not read: see :attr:`LagrangianSystem.angles`)
_GREEK = re.compile(
    r"(alpha|beta|gamma|delta|epsilon|zeta|eta|theta|iota|kappa|lambda|mu|nu|xi|pi|rho|sigma|tau|upsilon|phi|"
    r"varphi|chi|psi|omega|angle)(_?[0-9A-Za-z]{0,3})$|[\u03b1-\u03c9]"
)


def _check_assumptions(sym: Any, value: float) -> None:
    """A ValueError when a parameter's value contradicts what its symbol is declared to be (sympy has already
    simplified the expressions by it: Abs(k) is k for a positive k, so k = −4 would flip a spring)."""
    declared = [("positive", value > 0), ("negative", value < 0), ("nonnegative", value >= 0),
                ("nonpositive", value <= 0), ("nonzero", value != 0), ("zero", value == 0),
                ("integer", float(value).is_integer())]  # fmt: skip
    for name, holds in declared:
        if getattr(sym, f"is_{name}") and not holds:
            raise ValueError(
                f"LagrangianSystem: parameter {sym} = {value:g} is not {name}, as its symbol is declared "
                f"({sym}.is_{name}); sympy simplifies by that (|{sym}| is {sym} for a positive {sym}): give a value "
                "that is, or a symbol declared without it"
            )


def positive_definite_scaled(M: np.ndarray) -> bool:
    """Whether M (n × n, finite) is symmetric and positive definite, judged on its Jacobi scaling D^-½ M D^-½
    (D its diagonal): symmetric to 1e-12 and the smallest eigenvalue above 1e-12 there. The scaling makes the
    test independent of the coordinates' units: diag(1, r²) of a satellite in metres (eigenvalues 1 and 4.9e13)
    was refused against its largest eigenvalue."""
    if not len(M):
        return True
    d = np.diag(M).astype(float)
    if not np.all(d > 0.0):
        return False
    s = 1.0 / np.sqrt(d)
    Ms = M * np.outer(s, s)
    if not np.allclose(Ms, Ms.T, rtol=0.0, atol=1e-12):
        return False
    return bool(np.linalg.eigvalsh(0.5 * (Ms + Ms.T))[0] > 1e-12)


class LagrangianSystem:
    """A mechanical system written as a Lagrangian in the user's own coordinates.

    Everything the integrators need is derived once, symbolically, at
    construction: ∂L/∂q, the momentum p = ∂L/∂v, the mass matrix
    M(q, v) = ∂²L/∂v², the mixed and position Hessians, the constraint
    Jacobian G = ∂g/∂q and its second derivatives, the energy
    E = v·∂L/∂v − L, and the generalized force Q(q, v, t) with its Jacobians;
    they are turned into NumPy code by ``sympy.lambdify`` (with common
    subexpression elimination). Simulate it with :func:`mbvi.simulate` and the
    integrator names used for scenes; find its statics with
    :func:`mbvi.equilibrium`.

    Parameters
    ----------
    L : sympy.Expr
        The Lagrangian L(q, v, t) = T − U, J.
    coordinates : sequence of sympy.Symbol
        Generalized coordinates q (n of them), in whatever units they have
        (rad for angles, m for lengths).
    velocities : sequence of sympy.Symbol
        Their time derivatives v = q̇ (n of them, in the same order).
    constraints : sequence of sympy.Expr, optional
        Holonomic constraints g(q) = 0 (m of them; functions of q and
        parameters only). Enforced by Lagrange multipliers.
    force : sequence of sympy.Expr, optional
        Non-conservative generalized force Q(q, v, t) (n components: N for
        length coordinates, N·m for angles), applied by the Lagrange–d'Alembert
        principle (viscous friction, a driving torque F(t), …).
    parameters : mapping of sympy.Symbol or str to float, optional
        Values of the other symbols (masses, lengths, g, …); substituted
        before differentiation in the NumPy forms, read at run time by the
        compiled kernels (other values run on the kernels compiled for the
        first).
    time : sympy.Symbol, optional
        The time symbol (default ``sympy.Symbol("t")``).
    initial_state : mbvi.State or (q0, v0), optional
        Where :func:`mbvi.simulate` starts when it is given no
        ``initial_state`` (the command line always starts here). Also the
        state at which the mass matrix is checked to be positive definite.
    name : str, optional
        A label for plots and the saved trajectory.

    Raises
    ------
    ValueError
        Coordinates and velocities of different lengths, a symbol given twice,
        a symbol that is neither a coordinate, a velocity, time nor a given
        parameter (named), constraints that depend on velocities or time, a
        force with the wrong number of components, or a mass matrix that is not
        positive definite at the initial state (or at q = 0, v = 0 without one).

    Examples
    --------
    A pendulum in its angle (m = l = g = 1):

    >>> import sympy as sp, mbvi
    >>> th, w = sp.symbols("theta omega")
    >>> pend = mbvi.LagrangianSystem(w**2 / 2 + sp.cos(th), [th], [w],
    ...                              initial_state=mbvi.State([0.5], [0.0]))
    >>> traj = mbvi.simulate(pend, t_end=1.0, dt=0.01, integrator="midpoint")
    >>> traj.q.shape
    (101, 1)
    """

    def __init__(
        self,
        L: Any,
        coordinates: Sequence[Any],
        velocities: Sequence[Any],
        constraints: Sequence[Any] | None = None,
        force: Sequence[Any] | None = None,
        parameters: Mapping[Any, float] | None = None,
        time: Any = None,
        initial_state: State | tuple[Any, Any] | None = None,
        name: str | None = None,
    ) -> None:
        import sympy as sp

        from mbvi.lagrangian.derive import derive

        q = _symbols(coordinates, "coordinates")
        v = _symbols(velocities, "velocities")
        if len(q) != len(v):
            raise ValueError(
                f"LagrangianSystem: {len(q)} coordinates {[str(s) for s in q]} but {len(v)} velocities "
                f"{[str(s) for s in v]}; give one velocity per coordinate"
            )
        if not q:
            raise ValueError("LagrangianSystem: no coordinates given")
        t = sp.Symbol("t") if time is None else _symbols(time, "time")[0]
        params: dict[Any, float] = {}
        for key, val in dict(parameters or {}).items():
            sym = sp.Symbol(key) if isinstance(key, str) else key
            if not isinstance(sym, sp.Symbol):
                raise ValueError(f"LagrangianSystem: parameter {key!r} is not a sympy Symbol or a name")
            try:  # a number (sympy's too: sp.pi, sp.Rational(1, 2)); not a bool or a text that looks like one,
                if isinstance(val, (bool, np.bool_, str, bytes)):  # as a scene's elements refuse them (g = True
                    raise TypeError  # was taken as g = 1)
                fval = float(val)
            except (TypeError, ValueError):
                raise ValueError(f"LagrangianSystem: parameter {sym} = {val!r} is not a number") from None
            if not np.isfinite(fval):
                raise ValueError(f"LagrangianSystem: parameter {sym} = {val!r} is not finite")
            _check_assumptions(sym, fval)
            params[sym] = fval
        seen: dict[Any, str] = {}
        for role, syms in (("coordinate", q), ("velocity", v), ("time", [t]), ("parameter", list(params))):
            for s in syms:
                if s in seen:
                    raise ValueError(f"LagrangianSystem: symbol {s} is given twice (as a {seen[s]} and as a {role})")
                seen[s] = role
        Lx = _expressions(L, "Lagrangian")
        if len(Lx) != 1:
            raise ValueError("LagrangianSystem: L must be one scalar sympy expression")
        raw_g = _expressions(constraints, "constraint")
        raw_f = None if force is None else _expressions(force, "force component")
        # a parameter is its name: Symbol("k", positive=True) in L is the parameter "k" (or Symbol("k")) given
        used = set().union(Lx[0].free_symbols, *(e.free_symbols for e in raw_g + list(raw_f or ()))) - set(seen)
        rename = {s: k for k in params for s in used if s.name == k.name}
        for s, k in rename.items():  # (a value sympy's simplification of L under the symbol's assumptions contradicts)
            _check_assumptions(s, params[k])
        # so is a coordinate, a velocity or time: Symbol("x", real=True) in L (as sympy.physics users write it) is
        # the coordinate "x" (said not to be one, with advice that then failed: "x is given twice")
        by_name = {str(c): c for c in (*q, *v, t)}
        rename.update({s: by_name[s.name] for s in used if s.name in by_name and s not in rename})
        # the expressions with the parameters as symbols: the compiled kernels read their values at run time, so
        # a system with other values (a fit, a sweep) runs on the kernels compiled for the first
        Ls, gs = Lx[0].subs(rename), [e.subs(rename) for e in raw_g]
        fs = None if raw_f is None else [e.subs(rename) for e in raw_f]
        values = {k: sp.Float(val) for k, val in params.items()}
        Lx, gx = Ls.subs(values), [e.subs(values) for e in gs]
        fx = None if fs is None else [e.subs(values) for e in fs]
        for what, exprs in (("Lagrangian", [Lx]), ("constraint", gx), ("force component", fx or [])):
            for e in exprs:  # (a parameter's value can make one: m = 0 in v²/2m)
                if e.has(sp.zoo, sp.nan, sp.oo, -sp.oo):
                    given = ", ".join(f"{k} = {val:g}" for k, val in params.items())
                    raise ValueError(f"LagrangianSystem: {what} {e} has an infinity or NaN in it with the parameters "
                                     f"given ({given}): a division by zero?")  # fmt: skip
        known = set(q) | set(v) | {t}
        self._check_symbols(Lx, known, "the Lagrangian")
        for i, e in enumerate(gx):
            roles = [(sorted(e.free_symbols & set(v), key=str), "the velocity"), (sorted(e.free_symbols & {t}), "time")]
            for found, role in roles:
                if found:
                    raise ValueError(
                        f"LagrangianSystem: constraint {i} ({e}) depends on {role} ({', '.join(map(str, found))}): "
                        "constraints must be holonomic and scleronomic, g(q) = 0 in the coordinates only (a "
                        "moving constraint can be written with its motion in L, or as a force)"
                    )
            self._check_symbols(e, set(q), f"constraint {i} ({e})", hint="constraints depend on coordinates only")
        if fx is not None:
            if len(fx) != len(q):
                raise ValueError(f"LagrangianSystem: force has {len(fx)} components but there are {len(q)} coordinates")
            for i, e in enumerate(fx):
                self._check_symbols(e, known, f"force component {i} ({e})")
            if all(e == 0 for e in fx):
                fx = None
        self.name = name or "LagrangianSystem"
        self.lagrangian_expr = Lx
        self.coordinates = tuple(q)
        self.velocities = tuple(v)
        self.time = t
        self.parameters = dict(params)
        self.constraint_exprs = tuple(gx)
        self.force_exprs = None if fx is None else tuple(fx)
        #: L, g and Q with the parameters as symbols, and the parameters in the order the kernels read them
        self._symbolic = (Ls, tuple(gs), None if fx is None else tuple(fs), tuple(params))
        #: the values the compiled kernels read, as given (the NumPy forms were derived with them: an edit of
        #: ``parameters`` afterwards changes neither)
        self._values = tuple(params.values())
        self._d = derive(Lx, q, v, t, gx, fx)
        self._compiled: Any = False  # compiled_kernels(): not tried yet
        self._kernel_exprs: tuple[dict, list[Any]] | None = None
        self._angles: tuple[bool, ...] | None = None
        #: True when L is quadratic in v (M independent of v): the Legendre transform is one linear solve
        self.quadratic = all(sp.diff(e, s) == 0 for e in self._d.mass_exprs for s in self._d.exprs["v"])
        #: True when the mass matrix ∂²L/∂v² depends on time explicitly (a run checks it at its start time)
        self.mass_depends_on_time = any(e.has(self._d.exprs["t"]) for e in self._d.mass_exprs)
        self._initial = None if initial_state is None else self._as_state(initial_state, "initial_state")
        #: body name → (x(q), R(q)) sympy matrices, for systems built by :meth:`from_scene`
        self._kinematics: dict[str, tuple[Any, Any]] = {}
        self._position_funcs: dict[str, Any] = {}
        # (a mass matrix that changes with time is checked at the run's start time only, which is the run's)
        if not self.mass_depends_on_time:
            if self._initial is not None:
                self._check_mass(self._initial.q, self._initial.v, "the initial state")
            else:
                self._check_mass_somewhere()

    # -- validation ------------------------------------------------------------------------------
    @staticmethod
    def _check_symbols(expr: Any, allowed: set[Any], where: str, hint: str = "") -> None:
        import sympy as sp
        from sympy.core.function import AppliedUndef

        undefined = sorted({str(f.func) for f in expr.atoms(AppliedUndef)})
        if undefined:
            raise ValueError(
                f"LagrangianSystem: {where} contains undefined function(s) {', '.join(undefined)}: write them out "
                "in the coordinates, velocities and time (sympy expressions mbvi can differentiate and compile)"
            )
        if expr.has(sp.I):
            raise ValueError(f"LagrangianSystem: {where} is not real (it contains the imaginary unit I)")
        unknown = sorted(expr.free_symbols - allowed, key=str)
        if unknown:
            names = ", ".join(str(s) for s in unknown)
            extra = f" ({hint})" if hint else ""
            raise ValueError(
                f"LagrangianSystem: {where} contains symbol(s) {names} that are neither coordinates, velocities, "
                f"time nor given parameters{extra}; pass parameters={{{unknown[0]}: value}} or list it"
            )

    def mass_defect(self, q: Any, v: Any, t: float = 0.0) -> np.ndarray | None:
        """What keeps the mass matrix ∂²L/∂v² at (q, v, t) from giving a motion, or None when it is symmetric
        positive definite: an empty array when it is not finite, else the eigenvalues of its symmetric part."""
        try:
            with np.errstate(all="ignore"):  # L's other terms may be singular there (1/r at r = 0): M is checked
                M = np.asarray(self.mass_matrix(q, v, t), dtype=float)
        except NoNumericForm:
            raise
        except (ValueError, ArithmeticError):  # a math function off its domain there (1/0.0, sqrt(−1), log(0))
            return np.zeros(0)
        if not np.all(np.isfinite(M)):
            return np.zeros(0)
        return None if positive_definite_scaled(M) else np.linalg.eigvalsh(0.5 * (M + M.T))

    def _check_mass(self, q: np.ndarray, v: np.ndarray, where: str, t: float = 0.0) -> None:
        w = self.mass_defect(q, v, t)
        if w is None:  # M fine: L and its gradients must be finite too (L = v²/2 − 1/x at x = 0)
            with np.errstate(all="ignore"):
                L, Lq, Lv = self.point(q, v, t)[:3]
            if not (np.isfinite(L) and np.isfinite(Lq).all() and np.isfinite(Lv).all()):
                w = np.zeros(0)
        if w is not None and not len(w):
            raise ValueError(f"LagrangianSystem {self.name!r}: L or its mass matrix ∂²L/∂v² is not finite at {where} "
                             "(outside L's domain, or a singular point of it)")  # fmt: skip
        if w is not None:
            raise ValueError(
                f"LagrangianSystem {self.name!r}: the mass matrix ∂²L/∂v² is not positive definite at {where} "
                f"(eigenvalues {np.array2string(w, precision=4)}); is L = T − U with T > 0 for every motion?"
            )

    def _check_mass_somewhere(self) -> None:
        """Without a start: the mass matrix must be positive definite at q = 0, v = 0 or, when q = 0 is a
        singular point of the coordinates (polar r = 0, a spherical pole), at some q near it; the start
        :meth:`initial_state` gives is checked then."""
        zero = np.zeros(self.nq)
        try:
            self._check_mass(zero, zero, "q = 0, v = 0")
        except ValueError as first:
            rng = np.random.default_rng(0)
            for _ in range(8):
                try:
                    self._check_mass(rng.uniform(0.5, 1.5, self.nq) * rng.choice((-1.0, 1.0), self.nq), zero, "")
                except ValueError:
                    continue
                return  # singular at q = 0 only: a coordinate singularity
            raise first

    def _as_state(self, state: Any, what: str) -> State:
        if isinstance(state, State):
            q, v = state.q, state.v
        else:
            try:
                q, v = state
            except (TypeError, ValueError):
                raise ValueError(f"{what} must be an mbvi.State or a pair (q0, v0)") from None
        q = real_array(q, f"{what}'s q").reshape(-1)
        v = real_array(v, f"{what}'s v").reshape(-1)
        if q.shape != (self.nq,) or v.shape != (self.nq,):
            raise ValueError(f"{what}: q and v must have shape ({self.nq},), got {q.shape} and {v.shape}")
        if not (np.isfinite(q).all() and np.isfinite(v).all()):
            raise ValueError(f"{what} is not finite")
        return State(q, v)

    # -- sizes and names -------------------------------------------------------------------------
    @property
    def nq(self) -> int:
        """Number of generalized coordinates n."""
        return len(self.coordinates)

    @property
    def nc(self) -> int:
        """Number of holonomic constraints m."""
        return len(self.constraint_exprs)

    @property
    def time_dependent(self) -> bool:
        """Whether L depends on time explicitly (then E = v·∂L/∂v − L is not conserved)."""
        return self.time in self.lagrangian_expr.free_symbols

    @property
    def angles(self) -> tuple[bool, ...]:
        """For each coordinate, whether it is an angle: L, Q and g unchanged when it turns by 2π (checked at a few
        random states); one they do not read at all (cyclic: a polar θ, a cart's x) by its name, a Greek letter
        (``theta``, ``phi2``, ``psi_1`` …). A picture draws two free angles on a torus, any other pair as a phase
        portrait."""
        if self._angles is None:
            rng = np.random.default_rng(1)
            exprs = [self.lagrangian_expr, *(self.force_exprs or ()), *self.constraint_exprs]
            read = set().union(*(e.free_symbols for e in exprs))
            found = []
            for i in range(self.nq):
                if self.coordinates[i] not in read:  # cyclic: a polar θ, or a cart's x; the name tells
                    found.append(_GREEK.match(self.coordinates[i].name) is not None)
                    continue
                same = True
                for _ in range(3):
                    q, v = rng.uniform(-2.0, 2.0, self.nq), rng.uniform(-1.0, 1.0, self.nq)
                    turned = q.copy()
                    turned[i] += 2 * np.pi
                    with np.errstate(all="ignore"):
                        a = [self.lagrangian(q, v, 0.3)]
                        b = [self.lagrangian(turned, v, 0.3)]
                        if self.has_forces:
                            a, b = [*a, *self.force(q, v, 0.3)], [*b, *self.force(turned, v, 0.3)]
                        if self.nc:
                            a, b = [*a, *self.constraints(q)], [*b, *self.constraints(turned)]
                    a, b = np.asarray(a, float), np.asarray(b, float)
                    same = same and bool(np.all(np.isfinite(a)) and np.allclose(a, b, rtol=1e-9, atol=1e-9))
                found.append(same)
            self._angles = tuple(found)
        return self._angles

    @property
    def has_forces(self) -> bool:
        """True when a non-conservative generalized force is given."""
        return self.force_exprs is not None

    @property
    def coordinate_names(self) -> list[str]:
        """Names of the coordinates, in order."""
        return [str(s) for s in self.coordinates]

    @property
    def derived(self) -> Any:
        """The lambdified functions (:class:`mbvi.lagrangian.derive.Derived`), for integrator authors."""
        return self._d

    def kernel_expressions(self) -> tuple[dict, list[Any]]:
        """What the compiled kernels evaluate (:mod:`mbvi.lagrangian.codegen`): the derivatives
        (:attr:`mbvi.lagrangian.derive.Derived.exprs`) with the parameters left as symbols, and those symbols in
        the order the kernels read their values; without parameters, :attr:`derived`'s expressions."""
        if self._kernel_exprs is None:
            Ls, gs, fs, params = self._symbolic
            if not params:
                self._kernel_exprs = (self._d.exprs, [])
            else:  # (real there, as the coordinates are: a parameter in an Abs had left it on its NumPy functions)
                from mbvi.lagrangian.derive import derivatives

                exprs = derivatives(Ls, self.coordinates, self.velocities, self.time, gs, fs, params)
                self._kernel_exprs = (exprs, exprs["p"])
        return self._kernel_exprs

    def compiled_kernels(self) -> Any:
        """The derivatives as compiled kernels (:mod:`mbvi.lagrangian.codegen`, generated and compiled on first
        use, then loaded from the disk cache), or None when numba cannot compile them."""
        if self._compiled is False:
            from mbvi.lagrangian.codegen import kernels

            self._compiled = kernels(self)
        return self._compiled

    # -- pickling (multiprocessing, Dask's process schedulers, saving a model with pickle) ----------
    def __getstate__(self) -> dict[str, Any]:
        """The sympy expressions and settings, without their lambdified and compiled forms (local functions
        pickle cannot write): those are made again where the system is unpickled."""
        state = dict(self.__dict__)
        state.pop("_d", None)
        state["_compiled"] = False
        state["_kernel_exprs"] = None
        state["_position_funcs"] = {}
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        from mbvi.lagrangian.derive import derive

        self.__dict__.update(state)
        self._d = derive(self.lagrangian_expr, self.coordinates, self.velocities, self.time,
                         self.constraint_exprs, self.force_exprs)  # fmt: skip

    def __repr__(self) -> str:
        extra = f", {self.nc} constraints" if self.nc else ""
        extra += ", forced" if self.has_forces else ""
        return f"LagrangianSystem({self.name!r}, coordinates={self.coordinate_names}{extra})"

    # -- the Lagrangian and its derivatives ------------------------------------------------------
    def point(self, q: Any, v: Any, t: float = 0.0) -> tuple:
        """``(L, L_q, L_v, L_qq, L_qv, L_vv)`` at one state (``L_qv[i, j] = ∂²L/∂q_i∂v_j``).

        Parameters
        ----------
        q, v : array_like, shape (n,)
        t : float, default: 0
            Time, s.
        """
        return self._d.point(np.asarray(q, float), np.asarray(v, float), float(t))

    def lagrangian(self, q: Any, v: Any, t: Any = 0.0) -> Any:
        """L(q, v, t), J. ``q``, ``v`` of shape (n,) give a float; (k, n) give shape (k,)."""
        return self._scalar("lagrangian", q, v, t)

    def energy(self, q: Any, v: Any, t: Any = 0.0) -> Any:
        """Energy E = v·∂L/∂v − L, J (shapes as in :meth:`lagrangian`)."""
        return self._scalar("energy", q, v, t)

    def potential(self, q: Any, t: Any = 0.0) -> Any:
        """Potential energy U(q) = −L(q, 0), J (q of shape (n,) or (k, n))."""
        q = np.asarray(q, float)
        return self._scalar("potential", q, np.zeros_like(q), t)

    def kinetic(self, q: Any, v: Any, t: Any = 0.0) -> Any:
        """Kinetic energy E − U, J (for L = ½vᵀM(q)v − U(q): ½vᵀM(q)v)."""
        return self.energy(q, v, t) - self.potential(q, t)

    def _scalar(self, key: str, q: Any, v: Any, t: Any) -> Any:
        q = np.asarray(q, float)
        v = np.asarray(v, float)
        if q.ndim == 1:
            return float(self._d.scalar[key](q[:, None], v[:, None], t)[0])
        return self._d.scalar[key](q.T, v.T, np.asarray(t, float))

    def momentum(self, q: Any, v: Any, t: Any = 0.0) -> np.ndarray:
        """Generalized momentum p = ∂L/∂v, shape (n,) (or (k, n) for k states)."""
        q = np.asarray(q, float)
        v = np.asarray(v, float)
        if q.ndim == 1:
            return self.point(q, v, t)[2]
        tt = np.asarray(t, float)
        return np.stack([f(q.T, v.T, tt) for f in self._d.momentum], axis=1)

    def mass_matrix(self, q: Any, v: Any = None, t: float = 0.0) -> np.ndarray:
        """Mass matrix M = ∂²L/∂v², shape (n, n) (``v`` defaults to 0)."""
        q = np.asarray(q, float)
        v = np.zeros_like(q) if v is None else np.asarray(v, float)
        return self.point(q, v, t)[5]

    def force(self, q: Any, v: Any, t: float = 0.0) -> np.ndarray:
        """Non-conservative generalized force Q(q, v, t), shape (n,) (zeros without one)."""
        if self._d.force is None:
            return np.zeros(self.nq)
        return self._d.force(np.asarray(q, float), np.asarray(v, float), float(t))[0]

    def force_jacobians(self, q: Any, v: Any, t: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """(∂Q/∂q, ∂Q/∂v), each (n, n) (zeros without a force)."""
        if self._d.force is None:
            z = np.zeros((self.nq, self.nq))
            return z, z.copy()
        _, dq, dv = self._d.force(np.asarray(q, float), np.asarray(v, float), float(t))
        return dq, dv

    # -- constraints -----------------------------------------------------------------------------
    def constraints(self, q: Any) -> np.ndarray:
        """Constraint values g(q), shape (m,)."""
        if not self.nc:
            return np.zeros(0)
        return self._d.constraint(np.asarray(q, float), np.zeros(self.nc))[0]

    def constraint_jacobian(self, q: Any) -> np.ndarray:
        """G = ∂g/∂q, dense, shape (m, n)."""
        if not self.nc:
            return np.zeros((0, self.nq))
        return self._d.constraint(np.asarray(q, float), np.zeros(self.nc))[1]

    def constraint_hessian(self, q: Any, lam: Any) -> np.ndarray:
        """Σ_k λ_k ∇²g_k(q), shape (n, n): the derivative of Gᵀλ with respect to q."""
        if not self.nc:
            return np.zeros((self.nq, self.nq))
        return self._d.constraint(np.asarray(q, float), np.asarray(lam, float))[2]

    def constraint_curvature(self, q: Any, v: Any) -> np.ndarray:
        """γ = (∂(G v)/∂q) v, shape (m,), so that g̈ = G q̈ + γ."""
        if not self.nc:
            return np.zeros(0)
        return self._d.curvature(np.asarray(q, float), np.asarray(v, float))[0]

    def constraint_error(self, q: Any) -> np.ndarray:
        """max |g(q)| for each of k states (q of shape (k, n)), shape (k,)."""
        q = np.atleast_2d(np.asarray(q, float))
        if not self.nc:
            return np.zeros(len(q))
        z = np.zeros_like(q.T)
        return np.max(np.abs([row(q.T, z, 0.0) for row in self._d.constraint_rows]), axis=0)

    # -- states ----------------------------------------------------------------------------------
    def velocity(self, q: Any, p: Any, t: float = 0.0, v_guess: Any = None) -> np.ndarray:
        """Inverse Legendre transform: the v with ∂L/∂v(q, v, t) = p, shape (n,) (Newton; one step for quadratic L)."""
        q = np.asarray(q, float)
        p = np.asarray(p, float)
        v = np.zeros_like(q) if v_guess is None else np.array(v_guess, float)
        for _ in range(50):
            _, _, Lv, _, _, Lvv = self.point(q, v, t)
            dv = np.linalg.solve(Lvv, p - Lv)
            v = v + dv
            if np.max(np.abs(dv)) <= 1e-14 * (1.0 + np.max(np.abs(v))):
                return v
        from mbvi.errors import SolverError

        raise SolverError(f"{self.name}: the Legendre transform p = ∂L/∂v(q, v) did not converge")

    def project_velocity(self, q: Any, v: Any, t: float = 0.0) -> np.ndarray:
        """The velocity closest to ``v`` in the mass-weighted norm with G(q) v = 0, shape (n,)."""
        v = np.asarray(v, float)
        if not self.nc:
            return v.copy()
        M = self.mass_matrix(q, v, t)
        G = self.constraint_jacobian(q)
        K = np.block([[M, G.T], [G, np.zeros((self.nc, self.nc))]])
        rhs = np.concatenate([M @ v, np.zeros(self.nc)])
        sol = np.linalg.lstsq(K, rhs, rcond=None)[0]
        return sol[: self.nq]

    def initial_state(self, state: Any = None, warn: bool = True, t: float = 0.0, flat: bool | None = None) -> State:
        """A checked start: ``state`` (or the constructor's ``initial_state``) on the constraints, at time ``t`` (s:
        a run's start, where the mass matrix must be positive definite).

        Positions must satisfy g(q) = 0 (to 1e-9 of the coordinates' scale);
        velocities are projected onto G(q) v = 0 (mass-weighted), with an
        :class:`mbvi.ConstraintWarning` when the correction is not negligible
        (``warn``), and one naming a constraint whose gradient vanishes there
        (``flat``; None: as ``warn``).

        Raises
        ------
        ValueError
            No state anywhere, a state of the wrong shape or not finite, or
            positions that violate a constraint (named).
        """
        if state is None:
            if self._initial is None:
                raise ValueError(
                    f"LagrangianSystem {self.name!r} has no initial state: pass initial_state=mbvi.State(q0, v0) "
                    "to mbvi.simulate or to the LagrangianSystem constructor"
                )
            state = self._initial
        s = self._as_state(state, "initial_state")
        self._check_mass(s.q, s.v, f"the initial state q = {s.q.tolist()}, v = {s.v.tolist()}, t = {t:g} s", t)
        if not self.nc:
            return s
        g = self.constraints(s.q)
        # judged as a distance |g| / |∇g| in the coordinates' own scale, not as |g| against 1e-9: a 0.1 mm
        # pendulum's x² + y² − l² is 1e-8 at most, and a start 4 % off its rod passed
        scale = float(np.max(np.abs(s.q))) or 1.0
        grad = np.linalg.norm(np.atleast_2d(np.asarray(self.constraint_jacobian(s.q), dtype=float)), axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            off = np.where(grad > 0.0, np.abs(g) / grad, np.abs(g) / scale)
        bad = np.flatnonzero(off > 1e-9 * scale)
        if len(bad):
            k = int(bad[np.argmax(off[bad])])
            raise ValueError(
                f"initial positions violate constraint {k} ({self.constraint_exprs[k]} = 0): its value is {g[k]:.3g}"
            )
        if warn if flat is None else flat:  # (``flat``: a batch names them once, for its first member)
            self._warn_flat_constraints(s.q, grad, scale)
        v = self.project_velocity(s.q, s.v)
        corr = float(np.max(np.abs(v - s.v)))
        if warn and corr > _WARN_CORRECTION * max(float(np.max(np.abs(s.v))), 1e-300) and corr > 1e-12:
            notices.warn(
                f"initial velocities violate the constraints of {self.name!r}; projected onto them "
                f"(largest change {corr:.3g})",
                ConstraintWarning,
            )
        return State(s.q.copy(), v)

    def _warn_flat_constraints(self, q: np.ndarray, grad: np.ndarray, scale: float) -> None:
        """A ConstraintWarning naming each constraint whose gradient ∇g vanishes at the start (below 1e-6 of its size
        a thousandth of the coordinates' scale away): g = 0 written squared, (x − Rφ)² = 0, holds the motion only as
        far as the solver's round-off lets it (a rolling disk's x(1) off by 3e-3, csm failing at t = 0)."""
        rng = np.random.default_rng(2)
        near = q + 1e-3 * scale * rng.standard_normal(self.nq)
        with np.errstate(all="ignore"):
            there = np.linalg.norm(np.atleast_2d(np.asarray(self.constraint_jacobian(near), dtype=float)), axis=1)
        flat = np.flatnonzero(~(grad > 1e-6 * there) & (there > 0.0))
        if len(flat):
            named = ", ".join(f"{k} ({self.constraint_exprs[k]} = 0)" for k in flat)
            notices.warn(
                f"LagrangianSystem {self.name!r}: the gradient of constraint {named} vanishes at the initial state, "
                "so the force holding it is not determined there and the motion may leave it; written squared? "
                "Write g so that ∇g ≠ 0 where g = 0 (x − R φ = 0, not (x − R φ)² = 0)",
                ConstraintWarning,
            )

    # -- bodies of a scene ---------------------------------------------------------------------
    @property
    def body_names(self) -> list[str]:
        """Names of the scene's bodies (systems built by :meth:`from_scene`; else empty)."""
        return list(self._kinematics)

    def body_position(self, name: str, q: Any) -> np.ndarray:
        """World position of a scene body's origin, m: shape (3,) for q (n,), (k, 3) for q (k, n).

        Only for systems built by :meth:`from_scene`.
        """
        if name not in self._kinematics:
            raise ValueError(
                f"unknown body {name!r}" + ("" if self._kinematics else f": {self.name!r} was not built from a scene")
            )
        if name not in self._position_funcs:
            import sympy as sp

            x = list(self._kinematics[name][0])
            self._position_funcs[name] = [sp.lambdify([list(self.coordinates)], e, modules="numpy") for e in x]
        q = np.asarray(q, float)
        cols = q.T if q.ndim == 2 else q
        out = [np.broadcast_to(np.asarray(f(list(cols)), float), cols.shape[1:]) for f in self._position_funcs[name]]
        return np.stack(out, axis=-1)

    # -- other constructions ---------------------------------------------------------------------
    @classmethod
    def from_scene(cls, scene: Any, name: str | None = None) -> LagrangianSystem:
        """The joint-coordinate (minimal) Lagrangian of a tree scene.

        See :func:`mbvi.lagrangian.scene.from_scene` for what is supported.
        """
        from mbvi.lagrangian.scene import from_scene

        return from_scene(scene, name=name, system_type=cls)
