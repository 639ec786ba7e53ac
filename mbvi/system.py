"""The assembled system: everything an integrator needs, nothing about scenes.

Equations of motion in maximal coordinates with a constant diagonal mass M:

    M q̈ = −∇U(q) + F(q, q̇, t) − G(q)ᵀ λ,      g(q) = 0,

with G = ∂g/∂q (sparse, the joint graph's structure).
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp

from mbvi import notices
from mbvi.engine.contract import Family, Kernel, PythonKernel, numpy_kernels
from mbvi.engine.spec import ROW_ROTATION, Bodies, ModelSpec, Pattern
from mbvi.errors import ConstraintWarning, LoadError, SolverError
from mbvi.forcelaws.base import ForceLaw
from mbvi.kernels import BilinearRows, SparsePattern
from mbvi.lawmethods import numpy_methods
from mbvi.layout import Layout
from mbvi.linalg import ConstraintSolver, Factor
from mbvi.state import State

__all__ = ["System"]

log = logging.getLogger("mbvi")
_told: set[str] = set()


def _law_compiled(law: ForceLaw) -> Any:
    """``law.compiled()``; what it raises as a ValueError naming the law (a Kernel made with bad ``ints`` said
    "Kernel ?: …", and any other error came out raw, naming nothing)."""
    try:
        return law.compiled()
    except Exception as exc:
        name = law.name or type(law).__name__
        raise ValueError(f"force law {name!r}: its compiled() raised {type(exc).__name__}: {exc}") from exc


def _compiled_parts(law: ForceLaw) -> list:
    """A law's compiled form as a list of :class:`~mbvi.engine.contract.Family` and
    :class:`~mbvi.engine.contract.Kernel` (its NumPy methods as kernels when it has none)."""
    c = _law_compiled(law)
    name = law.name or type(law).__name__
    if c is None:
        if name not in _told:
            _told.add(name)
            log.info("force law %r has no compiled kernel: its NumPy methods are called from the compiled loop", name)
        return [numpy_kernels(law, name)]
    parts = _as_parts(c, name)
    return parts + _missing_roles(law, name, parts)


def _as_parts(c: Any, name: str) -> list:
    """What a law's ``compiled()`` returned (not None) as a list of Families and Kernels: ``{family: arrays}`` (the
    earlier form), one of them, or a list of them; anything else is a ValueError naming the law ``name``."""
    if isinstance(c, dict):  # {family: arrays}, the earlier form
        try:
            return [Family(k, v) for k, v in c.items()]
        except ValueError as exc:  # (an unknown family, arrays of the wrong count: the family's own check)
            raise ValueError(f"force law {name!r}: its compiled() gave {exc}") from None
    if isinstance(c, (Family, Kernel)):
        return [c]
    if isinstance(c, (list, tuple)) and all(isinstance(p, (Family, Kernel)) for p in c):
        return list(c)
    got = (
        type(c).__name__
        if not isinstance(c, (list, tuple))
        else f"a {type(c).__name__} holding "
        + ", ".join(sorted({type(p).__name__ for p in c if not isinstance(p, (Family, Kernel))}))
    )
    raise ValueError(
        f"force law {name!r}: compiled() must return None, an mbvi.Kernel, a Family, a list of them or "
        f"{{family: arrays}}; got {got}"
    )


def _probe_kernels(law: ForceLaw, parts: list, q0: np.ndarray) -> None:
    """A plugin's kernels called once as Python at the initial configuration, before the compiled loop runs them:
    an index out of range (ints the law forgot to pack) is a ValueError naming the law, where the compiled kernel,
    unchecked, crashed the interpreter (a segmentation fault) or wrote past ``out`` without a word; so is a write
    into q, v, ints or floats (compiled, it changed the run's state, or the law's parameters, silently). Whatever
    else the Python form raises is left to the compiled loop (numba's own constructs may not run as Python)."""
    from mbvi.engine.callbacks import function_name

    nq = len(q0)
    for part in parts:
        if not isinstance(part, Kernel) or part.watch is not None:  # (a load's callable: mbvi's own wrapper)
            continue
        for role, fn in part.roles():
            py = getattr(fn, "py_func", fn)  # (a plain function too: mbvi compiles it)
            out = np.zeros(1 if role == "potential" else nq)
            args = [np.array(q0, dtype=float), np.zeros(nq), part.ints.copy(), part.floats.copy()]
            for a in args:  # what the kernel reads only: a write into them changed the run's state silently
                a.flags.writeable = False
            try:
                with np.errstate(all="ignore"):
                    py(args[0], args[1], 0.0, args[2], args[3], out)
            except Exception as exc:  # numpy's ValueError, or numba's TypingError from an njit helper it calls
                if "read-only" not in str(exc) and "readonly" not in str(exc):
                    if isinstance(exc, IndexError):
                        raise _out_of_range(law, role, fn, exc, part, nq) from None
                    continue  # (the compiled loop reports what its kernels raise)
                name = law.name or type(law).__name__
                raise ValueError(
                    f"force law {name!r}: its {role} kernel {function_name(fn)} writes into its q, v, ints or "
                    "floats (the run's state and the law's parameters, read-only); a kernel writes only into out"
                ) from None


def _out_of_range(law: ForceLaw, role: str, fn: Any, exc: Exception, part: Kernel, nq: int) -> ValueError:
    """The ValueError for a kernel whose Python form indexed out of range at the initial configuration."""
    from mbvi.engine.callbacks import function_name

    name = law.name or type(law).__name__
    return ValueError(
        f"force law {name!r}: its {role} kernel {function_name(fn)} indexes out of range at the initial "
        f"configuration ({exc}; ints has {len(part.ints)} entries, floats {len(part.floats)}, q and out {nq}): "
        "compiled, it would read or write outside its arrays"
    )


#: the NumPy method of each role a kernel plays, and the law's attribute that declares the role
_NUMPY_METHODS = {"force": "has_force", "gradient": "has_potential", "potential": "has_potential"}


def _numpy_from_kernels(law: ForceLaw) -> None:
    """A law that gives a role it declares only in its compiled form — a kernel or the engine's families — without
    writing the NumPy method has that method evaluate the compiled form (:mod:`mbvi.lawmethods`): the NumPy paths
    (explicit_euler, csm, statics, energies) took it as zero — a tether given as a gradient kernel or a
    ``point_force`` family was free fall under explicit_euler, with no word."""
    missing = [role for role, flag in _NUMPY_METHODS.items()
               if getattr(law, flag) and getattr(type(law), role) is getattr(ForceLaw, role)]  # fmt: skip
    if not missing:
        return
    made = _law_compiled(law)
    if made is None:  # (its NumPy methods are what it has: none to make)
        return
    for role, method in numpy_methods(missing, _as_parts(made, law.name or type(law).__name__), law.nq).items():
        setattr(law, role, method)


#: the roles the time loop calls, and the law's attribute that declares each
_LOOP_ROLES = {"force": "has_force", "gradient": "has_potential"}


def _missing_roles(law: ForceLaw, name: str, parts: list) -> list:
    """The law's NumPy methods for the roles it declares that its kernels and families do not give (called from the
    compiled loop, logged once); a kernel or family for a role it does not declare is a ValueError. A family gives
    the role of :data:`mbvi.engine.contract.FAMILY_ROLES` (a law that gives its potential as a ``spring`` family
    and declares a damping force as well has that force called from the loop: it was dropped)."""
    given = {role for p in parts for role, _ in p.roles()}
    for role, flag in _LOOP_ROLES.items():
        if role in given and not getattr(law, flag):
            raise ValueError(
                f"force law {name!r}: compiled() gives a {role} kernel or family but the law's {flag} is False (the "
                f"engine would never call it): set {flag} = True, or drop the kernel"
            )
    # numpy_kernels gives exactly the roles the law declares
    missing = {role: fn for role, fn in numpy_kernels(law, name).roles() if role in _LOOP_ROLES and role not in given}
    if not missing:
        return []
    if (name, tuple(missing)) not in _told:
        _told.add((name, tuple(missing)))
        log.info("force law %r gives no %s kernel: its NumPy %s is called from the compiled loop", name,
                 " or ".join(missing), " and ".join(missing))  # fmt: skip
    return [PythonKernel(**missing, name=name)]


def _law_call(law: ForceLaw, what: str, method, *args, finite: bool = False, nq: int | None = None):
    """``method(*args)`` of a law; what it raises (but a SolverError, already located) as a
    :class:`~mbvi.errors.LoadError` naming the law: the run stops there, with its time and trajectory. With
    ``finite`` (a force or a gradient), so does a value with NaN or inf at a finite, moderate state (on the NumPy
    path it was taken for the integrator's instability: "reduce dt"), and with ``nq`` a value not of shape (nq,)
    (NumPy broadcast it, or failed naming nothing, as the compiled loop does not)."""
    try:
        value = method(*args)
    except SolverError:
        raise
    except Exception as exc:
        name = law.name or type(law).__name__
        raise LoadError(f"force law {name!r}: its {what} raised {type(exc).__name__}: {exc}",
                        culprit=f"force law {name!r}") from exc  # fmt: skip
    if nq is not None and np.shape(value) != (nq,):
        name = law.name or type(law).__name__
        raise LoadError(f"force law {name!r}: its {what} returned shape {np.shape(value)}, expected ({nq},)",
                        culprit=f"force law {name!r}")  # fmt: skip
    if finite and not np.all(np.isfinite(value)):
        state = [a for a in args if isinstance(a, np.ndarray)]
        # a state of 1e150 and more overflows in any squared length: a blow-up's, not the law's fault
        if all(np.all(np.abs(a) < 1e150) for a in state):
            name = law.name or type(law).__name__
            raise LoadError(f"force law {name!r}: its {what} returned non-finite values at a finite state",
                            culprit=f"force law {name!r}")  # fmt: skip
    return value


def _potential_of(law: ForceLaw, q: np.ndarray) -> np.ndarray:
    """A law's ``potential`` at q (nq,) or at each configuration of q (..., nq) (one call a configuration unless the
    law is ``batched``), checked: what it raises, or a value that is not one number a configuration (None was a
    TypeError naming nothing; a batched law that summed its batch gave every state one energy), is a LoadError
    naming the law. Its values are not judged finite here: an energy may overflow where a run blew up, or be
    infinite where a trajectory's unused rows hold zeros (U = −k/|x|), and the run, not the law, is at fault.
    """
    if law.batched or q.ndim == 1:
        value = _law_call(law, "potential(q)", law.potential, q)
    else:
        rows = q.reshape(-1, q.shape[-1])
        value = _law_call(law, "potential(q)", lambda: [law.potential(x) for x in rows])
    name = law.name or type(law).__name__
    try:
        if value is None or (isinstance(value, list) and any(x is None for x in value)):  # (NumPy makes it NaN)
            raise TypeError
        u = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        if isinstance(value, list):
            bad = next((x for x in value if x is None or not np.ndim(x) == 0), value[0] if value else None)
            what = type(bad).__name__
        else:
            what = type(value).__name__
        raise LoadError(f"force law {name!r}: its potential(q) returned {what}, not a number (J)",
                        culprit=f"force law {name!r}") from None  # fmt: skip
    if not (law.batched or q.ndim == 1):
        if u.shape != (len(rows),):
            raise LoadError(f"force law {name!r}: its potential(q) returned shape {u.shape[1:]} for one "
                            "configuration, expected () (one number)", culprit=f"force law {name!r}")  # fmt: skip
        u = u.reshape(q.shape[:-1])
    if u.shape != q.shape[:-1]:
        each = "one a configuration: batched = True" if q.ndim > 1 else "one number"
        raise LoadError(f"force law {name!r}: its potential(q) returned shape {u.shape} for q of shape {q.shape}, "
                        f"expected {q.shape[:-1]} ({each})", culprit=f"force law {name!r}")  # fmt: skip
    return u


class System:
    """A mechanical system in generalized coordinates (built by :func:`mbvi.assemble`).

    Attributes
    ----------
    nq : int
        Number of generalized coordinates.
    nc : int
        Number of constraint equations (including redundant ones).
    mass : ndarray, shape (nq,)
        Diagonal of the constant mass matrix (kg, or kg m² for rotation columns).
    inv_mass : ndarray, shape (nq,)
        Its inverse.
    active : ndarray of int
        Constraint rows used in solves (redundant rows removed).
    constraint_scale : ndarray, shape (nc,)
        Natural size of each constraint row (m for lengths, 1 for orthonormality);
        solvers converge on ``max |g / constraint_scale|``.
    tolerance : float
        Default relative constraint tolerance of projections (1e-12); integrators
        keep their own ``tol`` and never change this.
    layout : mbvi.layout.Layout
        Coordinate layout (body offsets, translation/rotation blocks).
    """

    def __init__(
        self, layout: Layout, rows: BilinearRows, active: np.ndarray, laws: list[ForceLaw], geometry: dict | None = None
    ) -> None:
        self.layout = layout
        self.nq = layout.nq
        self.nc = rows.n
        self.mass = layout.mass.copy()
        self.inv_mass = 1.0 / self.mass
        self.rows = rows
        self.active = np.asarray(active, dtype=np.intp)
        self.constraint_scale = rows.scale
        self.active_scale = rows.scale[self.active]
        # what round-off alone leaves in g (scenes far from the origin): never asked of a solver. One rounding
        # of each coordinate (not the generous bound of 64, which let SHAKE stop 10 ulps of |q| off the
        # constraints when its first iterate landed there); SHAKE accepts more only when it stalls
        # (mbvi.engine.kernels.residual_at_roundoff)
        self.active_roundoff = rows.roundoff(layout.q0, ulps=1.0)[self.active] if rows.n else np.zeros(0)
        self.tolerance = 1e-12
        self.length_scale = layout.length_scale
        self.laws = laws
        for law in laws:
            _numpy_from_kernels(law)
        self.potential_laws = [law for law in laws if law.has_potential]
        self.force_laws = [law for law in laws if law.has_force]
        self.has_forces = bool(self.force_laws)
        self.has_velocity_forces = any(law.velocity_dependent for law in self.force_laws)
        self.geometry = geometry or {}
        if len(self.active) == self.nc:
            self._active_pattern, self._active_mask = rows.pattern, None
        else:
            self._active_pattern, self._active_mask = rows.pattern.subset_rows(self.active)
        tb = layout.translation_blocks
        self._trans_idx = (tb[:, None] + np.arange(3)).ravel()
        self._trans_mass = self.mass[self._trans_idx].reshape(-1, 3)
        self._engine = False  # built on first use by engine_model()
        self._engine_keys: tuple = ()  # what the loads' callables read when it was built (see engine_model)

    @functools.cached_property
    def solver(self) -> ConstraintSolver:
        """The NumPy path's factorization of A = G M⁻¹ Gᵀ on the active rows' pattern (built when first used:
        the compiled engine has its own, :meth:`engine_model`)."""
        return ConstraintSolver(self._active_pattern, self.inv_mass)

    @functools.cached_property
    def energy_unit(self) -> float:
        """Σ m g L of the bodies, J: their masses, the scene's own |g| (9.81 m/s² as a reference acceleration
        without gravity) and :attr:`length_scale`. The energy a run's energies are judged against at the least
        (:func:`mbvi.runs.energy_scales`): a body resting in balance moves by round-off, which is no error. It
        counted the rigid bodies' column masses (kg m²) beside their masses (a crane of 1e4 kg links weighed
        2.6e7 kg), and a 1e-12 kg resonator's millimetre, not its micrometre (its 99 % energy error passed)."""
        g = getattr(self.geometry, "gravity", None)
        g = float(np.linalg.norm(g)) if g is not None else 0.0
        energy = float(np.sum(self._trans_mass[:, 0])) * (g if g > 0 else 9.81) * self.length_scale
        return energy if math.isfinite(energy) else 0.0

    # -- energy ----------------------------------------------------------------------------------
    def kinetic(self, v: np.ndarray) -> np.ndarray | float:
        """Kinetic energy ½ vᵀ M v, J (v may be batched (..., nq))."""
        return 0.5 * np.einsum("...i,i,...i->...", v, self.mass, v)

    def potential(self, q: np.ndarray) -> np.ndarray | float:
        """Potential energy U(q), J (q may be batched (..., nq)).

        Raises
        ------
        mbvi.LoadError
            A law's ``potential`` raised, or returned something not a number (a batched law: not one a
            configuration), naming the law.
        """
        total = np.zeros(q.shape[:-1])
        for law in self.potential_laws:
            total = total + _potential_of(law, q)
        return total if q.ndim > 1 else float(total)

    def potential_gradient(self, q: np.ndarray) -> np.ndarray:
        """∇U(q), shape (nq,)."""
        grad = np.zeros(self.nq)
        for law in self.potential_laws:
            grad += _law_call(law, "gradient(q)", law.gradient, q, finite=True, nq=self.nq)
        return grad

    def potential_hessian(self, q: np.ndarray) -> sp.csr_matrix:
        """∇²U(q), sparse (nq, nq)."""
        H = sp.csr_matrix((self.nq, self.nq))
        for law in self.potential_laws:
            H = H + law.hessian(q)
        return H.tocsr()

    def energy(self, q: np.ndarray, v: np.ndarray) -> np.ndarray | float:
        """Total mechanical energy T + U, J (batched allowed)."""
        return self.kinetic(v) + self.potential(q)

    # -- non-conservative forces -------------------------------------------------------------------
    def force(self, q: np.ndarray, v: np.ndarray, t: float) -> np.ndarray:
        """Non-conservative generalized force F(q, v, t), shape (nq,)."""
        f = np.zeros(self.nq)
        for law in self.force_laws:
            f += _law_call(law, "force(q, v, t)", law.force, q, v, t, finite=True, nq=self.nq)
        return f

    def force_jacobians(self, q: np.ndarray, v: np.ndarray, t: float) -> tuple[sp.csr_matrix, sp.csr_matrix]:
        """(∂F/∂q, ∂F/∂v), sparse (nq, nq) each."""
        dq = sp.csr_matrix((self.nq, self.nq))
        dv = sp.csr_matrix((self.nq, self.nq))
        for law in self.force_laws:
            a, b = _law_call(law, "force_jacobians(q, v, t)", law.force_jacobians, q, v, t)
            dq, dv = dq + a, dv + b
        return dq.tocsr(), dv.tocsr()

    def work(self, q: np.ndarray, t: float = 0.0) -> float:
        """Work potential W(q) of the position-independent external loads, J."""
        return float(sum(law.work(q, t) for law in self.force_laws))

    def generalized_acceleration_force(self, q: np.ndarray, v: np.ndarray, t: float) -> np.ndarray:
        """−∇U(q) + F(q, v, t), shape (nq,)."""
        f = -self.potential_gradient(q)
        if self.has_forces:
            f += self.force(q, v, t)
        return f

    # -- momentum --------------------------------------------------------------------------------
    def momentum(self, v: np.ndarray) -> np.ndarray:
        """Linear momentum Σ m ẋ, shape (..., 3), kg m/s."""
        if v.ndim == 1:
            return np.sum(v[self._trans_idx].reshape(-1, 3) * self._trans_mass, axis=0)
        from mbvi.engine.rowvalues import linear_momenta  # compiled: one pass, no gathered copy of v

        blocks = self._trans_idx[::3]
        rows = math.prod(v.shape[:-1])  # (not -1: a scene without bodies has v of shape (n, 0))
        flat = linear_momenta(v.reshape(rows, v.shape[-1]), blocks, self._trans_mass.ravel())
        return flat.reshape(v.shape[:-1] + (3,))

    def angular_momentum(self, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Angular momentum about the origin, shape (..., 3), kg m²/s.

        Σ over all 3-blocks of mᵦ qᵦ × vᵦ: for a rigid body this is m x × ẋ plus
        its spin Σᵢ dᵢ rᵢ × ṙᵢ = R J Rᵀ ω.
        """
        q, v = np.broadcast_arrays(np.asarray(q, dtype=float), np.asarray(v, dtype=float))
        if q.ndim == 1:
            return np.einsum("bj,b->j", np.cross(q.reshape(-1, 3), v.reshape(-1, 3)), self.mass[::3])
        from mbvi.engine.rowvalues import angular_momenta  # compiled: one pass, no (…, nq) temporaries

        rows = math.prod(q.shape[:-1])
        flat = angular_momenta(q.reshape(rows, q.shape[-1]), v.reshape(rows, v.shape[-1]), self.mass[::3])
        return flat.reshape(q.shape[:-1] + (3,))

    # -- constraints -----------------------------------------------------------------------------
    def constraints(self, q: np.ndarray) -> np.ndarray:
        """g(q), shape (..., nc)."""
        return self.rows.values(q)

    def constraint_jacobian(self, q: np.ndarray) -> sp.csr_matrix:
        """G(q) = ∂g/∂q as ``scipy.sparse.csr_matrix``, shape (nc, nq)."""
        return self.rows.pattern.tocsr(self.rows.jacobian_data(q))

    def constraint_hessian(self, lam: np.ndarray) -> sp.csr_matrix:
        """Σ_r λ_r ∇²g_r, shape (nq, nq) (constant in q: every row is bilinear)."""
        return self.rows.hessian(lam)

    def constraint_velocity(self, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """ġ = G(q) v, shape (..., nc)."""
        return self.rows.velocity(q, v)

    def constraint_curvature(self, v: np.ndarray) -> np.ndarray:
        """Ġ(q, v) v, shape (nc,) — the acceleration-free part of g̈."""
        return self.rows.curvature(v)

    def constraint_error(self, q: np.ndarray) -> np.ndarray | float:
        """max |g(q)| over rows (batched allowed)."""
        if self.nc == 0:
            return np.zeros(q.shape[:-1]) if q.ndim > 1 else 0.0
        if q.ndim > 1:
            return self.rows.largest(q)
        return np.max(np.abs(self.constraints(q)), axis=-1)

    def stiffest_element(self) -> tuple[str, float] | None:
        """(name, ω in rad/s) of the force element with the highest estimated natural frequency, if any."""
        best: tuple[str, float] | None = None
        for law in self.laws:
            omega = law.frequencies()
            if omega is not None and len(omega):
                i = int(np.argmax(omega))
                if best is None or omega[i] > best[1]:
                    best = (law.elements[i].name, float(omega[i]))
        return best

    # -- compiled engine ---------------------------------------------------------------------------
    def engine_model(self):
        """The system flattened for the compiled engine (an :class:`mbvi.engine.model.Model`), or None.

        None when the constraint matrix is too wide for the compiled profile
        solver: the NumPy path then runs it. Every force law takes part, by its
        compiled kernels or, without them, by its NumPy methods called from the
        compiled loop. Built once, and again when what a load's callable reads has
        changed since (a module-level gain: the compiled form bakes it in, where the
        NumPy path reads it at each call); the System is otherwise immutable.
        """
        keys = self._load_keys()
        if self._engine is False or keys != self._engine_keys:
            from mbvi.engine.model import build

            self._engine = build(self.engine_spec())
            self._engine_keys = keys
        return self._engine

    def _load_functions(self) -> list[tuple[str, Any]]:
        """The loads' callables (a controller ``(t, state)``, a force of t), each with its element's label."""
        return [(f"{type(e).__name__} {getattr(e, 'name', '')!r}", f) for law in self.laws
                for e in getattr(law, "elements", ())
                for f in (getattr(e, "force", None), getattr(e, "torque", None)) if callable(f)]  # fmt: skip

    def _load_keys(self) -> tuple:
        """What the loads' callables (a controller ``(t, state)``, a force of t) compile from: their code and the
        values of the globals and closure cells they read (:func:`mbvi.engine.callbacks.code_key`)."""
        from mbvi.engine.callbacks import code_key

        return self._keyed_loads(code_key)

    def _load_reads(self) -> tuple:
        """What the loads' callables read now (:func:`mbvi.engine.callbacks.reads_key`), one key each: a run
        keeps it, and its reactions, which evaluate the loads again, are refused when it changed."""
        from mbvi.engine.callbacks import reads_key

        return self._keyed_loads(reads_key)

    def _keyed_loads(self, key: Callable[[Callable], str]) -> tuple:
        """``key(fn)`` of each load's callable; a callable it cannot read (a builtin, a C function) by its id."""
        keys = []
        for _, fn in self._load_functions():
            try:
                keys.append(key(fn))
            except Exception:
                keys.append(id(fn))
        return tuple(keys)

    def _changed_loads(self, keys: tuple) -> list[str]:
        """The loads whose callables read other values now than when ``keys`` (:meth:`_load_reads`) was taken
        (a global they read set anew since a run: its reactions would read the new values)."""
        now = self._load_reads()
        if now == keys:
            return []
        labels = [label for label, _ in self._load_functions()]
        if len(now) != len(keys):
            return labels
        return [label for label, a, b in zip(labels, now, keys, strict=True) if a != b]

    def engine_spec(self) -> ModelSpec:
        """What the compiled engine is built from: the active rows, their pattern and plan, the bodies, and each
        force law's compiled form (:class:`mbvi.engine.spec.ModelSpec`)."""
        layout = self.layout
        pattern = Pattern.of(self._active_pattern.rows, self._active_pattern.cols, self.nq, self.inv_mass)
        names = list(layout.bodies)
        offset = np.array([layout.offset[b] for b in names], dtype=np.int64)
        rigid = np.array([layout.kind(b) == "rigid" for b in names], dtype=bool)
        moments = np.zeros((len(names), 3))
        for i in np.flatnonzero(rigid):
            d = self.mass[offset[i] + 3 : offset[i] + 12 : 3]  # column masses d_c = ½ tr J − J_c
            moments[i] = d.sum() - d
        bodies = Bodies(offset, rigid, self.mass[offset], moments)
        joint_rows = joint_pattern = None
        if rigid.any():  # rigid bodies turn on SO(3): the engine keeps the joint rows only
            joints = self.active[self.rows.kind[self.active] != ROW_ROTATION]
            roundoff = self.rows.roundoff(layout.q0, ulps=1.0)[joints] if len(joints) else np.zeros(0)
            joint_rows = self.rows.terms(joints, roundoff)
            sub, _ = self.rows.pattern.subset_rows(joints)
            joint_pattern = Pattern.of(sub.rows, sub.cols, self.nq, self.inv_mass)
        laws = [_compiled_parts(law) for law in self.laws]
        for law, parts in zip(self.laws, laws, strict=True):
            _probe_kernels(law, parts, layout.q0)
        return ModelSpec(
            nq=self.nq,
            rows=self.rows.terms(self.active, self.active_roundoff),
            pattern=pattern,
            bodies=bodies,
            laws=laws,
            law_names=[law.name or type(law).__name__ for law in self.laws],
            has_forces=self.has_forces,
            has_velocity_forces=self.has_velocity_forces,
            joint_rows=joint_rows,
            joint_pattern=joint_pattern,
        )

    # -- tools for solvers -----------------------------------------------------------------------
    def active_values_and_jacobian(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """g on the active rows and G's values on the active pattern (:attr:`solver`)."""
        g, data = self.rows.values_and_jacobian(q)
        if self._active_mask is None:
            return g, data
        return g[self.active], data[self._active_mask]

    def active_constraints(self, q: np.ndarray) -> np.ndarray:
        """g on the active rows."""
        g = self.rows.values(q)
        return g if self._active_mask is None else g[self.active]

    def residual(self, g_active: np.ndarray, roundoff: np.ndarray | None = None) -> float:
        """max |g / scale| over active rows (dimensionless), not counting round-off (``roundoff``, (n_active,):
        default that of the initial configuration)."""
        if not len(g_active):
            return 0.0
        roundoff = self.active_roundoff if roundoff is None else roundoff
        return float((np.maximum(np.abs(g_active) - roundoff, 0.0) / self.active_scale).max())

    def residual_at(self, q: np.ndarray, g_active: np.ndarray) -> float:
        """:meth:`residual` with each row's round-off estimated at q, not at the initial configuration: a system
        that travelled far from where it started carries more (the twin of
        :func:`mbvi.engine.kernels.residual_at_roundoff`; SHAKE accepts it when it stalls there)."""
        if not len(g_active):
            return 0.0
        roundoff = self.rows.roundoff(q, ulps=1.0)
        return self.residual(g_active, roundoff if self._active_mask is None else roundoff[self.active])

    @property
    def jacobian_pattern(self) -> SparsePattern:
        """The COO pattern of G on the active rows (``rows`` numbered among them, ``cols``): where the values
        ``gdata`` of :meth:`active_values_and_jacobian` go."""
        return self._active_pattern

    def G_matvec(self, gdata: np.ndarray, x: np.ndarray) -> np.ndarray:
        """G x with active Jacobian values ``gdata``."""
        return self._active_pattern.matvec(gdata, x)

    def G_rmatvec(self, gdata: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Gᵀ y with active Jacobian values ``gdata``."""
        return self._active_pattern.rmatvec(gdata, y)

    def active_jacobian(self, gdata: np.ndarray) -> sp.csr_matrix:
        """Active G as a sparse matrix from its values."""
        return self._active_pattern.tocsr(gdata)

    def factor(self, q: np.ndarray) -> tuple[Factor, np.ndarray]:
        """Factor A = G M⁻¹ Gᵀ at q (active rows); returns (factor, G values)."""
        _, data = self.active_values_and_jacobian(q)
        return self.solver.factor(data), data

    def project_velocity(
        self, q: np.ndarray, v: np.ndarray, factor: Factor | None = None, gdata: np.ndarray | None = None
    ) -> np.ndarray:
        """Mass-weighted projection of v onto {v : G(q) v = 0}."""
        if len(self.active) == 0:
            return v
        if factor is None or gdata is None:
            _, gdata = self.active_values_and_jacobian(q)
            rhs = self.G_matvec(gdata, v)
            if not np.any(rhs):  # already on the joints (a scene released from rest): the projection is v itself
                return np.array(v, dtype=float)
            factor = self.solver.factor(gdata)
        else:
            rhs = self.G_matvec(gdata, v)
        mu = factor.solve(rhs)
        return v - self.inv_mass * self.G_rmatvec(gdata, mu)

    def project_position(self, q: np.ndarray, maxiter: int = 50, tol: float | None = None) -> np.ndarray:
        """Mass-weighted Newton projection of q onto g(q) = 0 (nearest point in the M-metric).

        Parameters
        ----------
        q : ndarray, shape (nq,)
        maxiter : int, default: 50
            Newton iterations (≥ 1).
        tol : float, optional
            Relative constraint tolerance (default :attr:`tolerance`, 1e-12).

        Raises
        ------
        ValueError
            For ``maxiter`` < 1 or a ``tol`` that is not a positive number.
        SolverError
            When Newton does not converge.
        """
        tol = self.tolerance if tol is None else tol
        if isinstance(maxiter, bool) or not isinstance(maxiter, int) or maxiter < 1:
            raise ValueError(f"project_position: maxiter must be a positive integer, got {maxiter!r}")
        if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not (0 < tol < np.inf):
            raise ValueError(f"project_position: tol must be a positive number, got {tol!r}")
        if len(self.active) == 0:
            return q
        q = q.copy()
        r = np.inf
        for _ in range(maxiter):
            g, data = self.active_values_and_jacobian(q)
            r = self.residual(g)
            if r <= tol:
                return q
            factor = self.solver.factor(data)
            q -= self.inv_mass * self.G_rmatvec(data, factor.solve(g))
        raise SolverError(f"projection onto the constraints did not converge (residual {r:.3g})")

    def projected_velocities(self, q: np.ndarray, v0: np.ndarray, v: np.ndarray) -> str:
        """What projecting the velocities ``v0`` onto the joints at ``q`` (giving ``v``) changed, for a warning: the
        body whose velocity changed most, by how much (m/s at its centre, rad/s for a rigid body's turn), and the
        joint its given velocity violated most."""
        from mbvi import kinematics

        layout, change = self.layout, np.abs(v - v0)
        worst = int(np.argmax(change))
        body = max((name for name, o in layout.offset.items() if o <= worst), key=lambda n: layout.offset[n])
        o = layout.offset[body]
        if layout.kind(body) == "rigid" and worst >= o + 3:
            r = q[o + 3 : o + 12].reshape(3, 3)
            turn = kinematics.angular_velocity(r, v[o + 3 : o + 12].reshape(3, 3) - v0[o + 3 : o + 12].reshape(3, 3))
            said = f"the angular velocity of RigidBody {body!r} by {float(np.linalg.norm(turn)):.3g} rad/s"
        else:
            kind = "RigidBody" if layout.kind(body) == "rigid" else "Particle"
            said = f"the velocity of {kind} {body!r} by {float(np.linalg.norm(v[o:o + 3] - v0[o:o + 3])):.3g} m/s"
        _, data = self.active_values_and_jacobian(q)
        rates = np.abs(self.G_matvec(data, v0)) / self.active_scale
        joint = self.rows.owner[int(self.active[int(np.argmax(rates))])] if len(rates) else None
        return said + (f" (the given velocities violated {joint} most)" if joint else "")

    def initial_state(self, warn: bool = True) -> State:
        """The scene's initial state: positions on the constraints, velocities projected onto them."""
        q = self.project_position(self.layout.q0)
        v0 = self.layout.v0
        v = self.project_velocity(q, v0)
        corr = float(np.max(np.abs(v - v0))) if self.nq else 0.0
        vmag = float(np.max(np.abs(v0))) if self.nq else 0.0
        if warn and corr > 1e-9 * max(vmag, 1e-300) and corr > 1e-12:
            notices.warn(
                f"initial velocities violate the joints; projected onto them: {self.projected_velocities(q, v0, v)}",
                ConstraintWarning,
            )
        return State(q, v)
