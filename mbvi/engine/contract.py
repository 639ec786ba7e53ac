"""The kernel contract: how a force law's own compiled code runs inside the engine's loop.

The engine is compiled once, against one fixed signature. A kernel is any
function of that signature; the engine calls it through its address, so a new
kernel never recompiles the engine, and a kernel compiled once is cached on
disk like the engine (:mod:`mbvi.engine.callbacks`).

A kernel is written as a numba-compilable Python function::

    def kernel(q, v, t, ints, floats, out):
        ...                     # add this law's contribution into out

with ``q``, ``v`` (nq,) the configuration and velocity (float64), ``t`` the time
(s), ``ints`` (int64) and ``floats`` (float64) the law's own parameters (index
and weight arrays, coefficients — whatever it packed), and ``out`` the array
it **adds** into:

============  ========  ======================================================
role          out       what the kernel adds
============  ========  ======================================================
``force``     (nq,)     the non-conservative generalized force F(q, v, t), N
``gradient``  (nq,)     the gradient ∇U(q) of the potential, N (v and t unused)
``potential`` (1,)      the potential energy U(q) into out[0], J
============  ========  ======================================================

A force law hands its kernels to the engine from :meth:`mbvi.ForceLaw.compiled`
as a :class:`Kernel`. The built-in laws hand over :class:`Family` contributions
instead: their instances in one of the engine's fused kernel families
(:data:`FAMILIES`, evaluated inside the engine's own loops). A law whose
``compiled()`` returns None still runs inside the compiled loop: the engine calls
its NumPy methods (``force``, ``gradient``, ``potential``) back from the loop,
one Python call per evaluation.

This module is numba-free (``import mbvi`` stays light).
"""

from __future__ import annotations

import ast
import inspect
import textwrap
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "FAMILIES",
    "FAMILY_ROLES",
    "ROLES",
    "Family",
    "Kernel",
    "NonFinite",
    "PythonKernel",
    "kernel_as_numpy",
    "numpy_kernels",
]

#: a kernel's role -> its code in the model (``M.KROLE``)
ROLES: dict[str, int] = {"force": 0, "gradient": 1, "potential": 2}
FORCE, GRADIENT, POTENTIAL = 0, 1, 2

#: the engine's fused kernel families: name -> the arrays a contribution gives (maps are (idx, w, c) triples)
FAMILIES: dict[str, tuple[str, ...]] = {
    "gravity": ("gvec",),
    "spring": ("map", "stiffness", "rest_length"),
    "torsion_spring": ("u1", "u2", "w1", "stiffness", "rest_angle"),
    "damper": ("map", "damping"),
    "drag": ("map", "coefficient"),
    "point_force": ("map", "force"),
    "torque": ("columns", "torque"),
    "hinge_damping": ("axis", "columns_a", "rigid_a", "columns_b", "rigid_b", "coefficient"),
    "slider_damping": ("axis", "map", "coefficient", "columns", "rigid"),
    "bending": ("edge_a", "edge_b", "stiffness"),
}

#: trailing arrays a family may leave out (its earlier form), made for its m instances: a prismatic joint damping
#: given without the body that takes its couple cancels none (the couple is zero on the joint's line)
OPTIONAL: dict[str, tuple] = {
    "slider_damping": (lambda m: np.zeros((m, 9), dtype=np.int64), lambda m: np.zeros(m)),
}

#: the role each family plays in the time loop: the gradient of a potential or a non-conservative force
FAMILY_ROLES: dict[str, str] = {
    "gravity": "gradient",
    "spring": "gradient",
    "torsion_spring": "gradient",
    "bending": "gradient",
    "damper": "force",
    "drag": "force",
    "point_force": "force",
    "torque": "force",
    "hinge_damping": "force",
    "slider_damping": "force",
}


@dataclass(frozen=True)
class Family:
    """A law's instances in one of the engine's fused families (:data:`FAMILIES`).

    ``owners``: the element of each instance, when one may change its value between calls
    (:class:`mbvi.Simulator`'s ``set_load``: the ``point_force`` and ``torque`` families).
    """

    name: str
    arrays: tuple
    owners: tuple = ()

    def roles(self) -> list[tuple[str, None]]:
        """The role the family plays in the time loop (:data:`FAMILY_ROLES`), as (role, None) pairs."""
        return [(FAMILY_ROLES[self.name], None)]

    def __post_init__(self) -> None:
        if self.name not in FAMILIES:
            raise ValueError(f"unknown kernel family {self.name!r}; known: {', '.join(FAMILIES)}")
        full, spare = len(FAMILIES[self.name]), OPTIONAL.get(self.name, ())
        if full - len(spare) <= len(self.arrays) < full:  # the earlier form: the trailing arrays made here
            m = len(np.atleast_1d(self.arrays[full - len(spare) - 1]))
            made = tuple(make(m) for make in spare[len(self.arrays) - full + len(spare) :])
            object.__setattr__(self, "arrays", tuple(self.arrays) + made)
        if len(self.arrays) != len(FAMILIES[self.name]):
            raise ValueError(
                f"kernel family {self.name!r} takes {len(FAMILIES[self.name])} arrays "
                f"({', '.join(FAMILIES[self.name])}), got {len(self.arrays)}"
            )


@dataclass(frozen=True)
class Kernel:
    """A force law's compiled kernels and their parameters (the kernel contract of :mod:`mbvi.engine.contract`).

    Parameters
    ----------
    force, gradient, potential : callable, optional
        Functions ``kernel(q, v, t, ints, floats, out)`` (numba-compilable; a ``numba.njit``
        function or a plain function mbvi compiles), each adding its contribution into
        ``out``: the non-conservative force (N), ∇U (N) or U into ``out[0]`` (J). The time loop calls
        ``force`` and ``gradient``; ``potential`` is optional (energies use the law's NumPy ``potential``).
    ints : array_like of int, optional
        The law's integer parameters (e.g. coordinate indices), passed as ``ints``.
    floats : array_like of float, optional
        Its float parameters (weights, coefficients), passed as ``floats``.
    name : str, optional
        What messages call it (default: the law's name).
    source : str, optional
        What the kernel runs, for messages (e.g. ``"its torque callable pd"``; default: ``"its <role> kernel"``).
    fallback : Kernel, optional
        The same contributions as Python functions (a :class:`PythonKernel`), called from the loop when numba
        cannot compile these (default: the functions themselves, as Python).
    watch : object, optional
        A failure record the engine reads after a failed run: an object with ``error`` (an exception or None),
        ``name``, ``role`` and ``reset()``, like :class:`mbvi.engine.callbacks.Callback`.
    salt : str, optional
        What else the compiled code depends on besides the functions' code and the constants they read (part
        of the disk cache's key).

    Examples
    --------
    Linear drag f = −c v on the particle at coordinates 0 … 2::

        @numba.njit
        def drag(q, v, t, ints, floats, out):
            for k in range(3):
                out[ints[0] + k] -= floats[0] * v[ints[0] + k]

        mbvi.Kernel(force=drag, ints=[0], floats=[0.3])
    """

    force: Callable | None = None
    gradient: Callable | None = None
    potential: Callable | None = None
    ints: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    floats: np.ndarray = field(default_factory=lambda: np.zeros(0))
    name: str = ""
    source: str = ""
    fallback: Kernel | None = None
    watch: object | None = None
    salt: str = ""

    def __post_init__(self) -> None:
        raw = np.asarray(self.ints)
        if (
            raw.size
            and raw.dtype.kind not in "iu"
            and not (raw.dtype.kind in "fb" and np.all(np.isfinite(raw)) and np.all(raw.astype(float) % 1 == 0))
        ):  # 1.7 would be truncated to 1 without a word
            raise ValueError(f"Kernel {self.name or '?'}: ints must be integers, got {raw.ravel()[:6].tolist()}")
        ints = np.ascontiguousarray(self.ints, dtype=np.int64).ravel()
        floats = np.ascontiguousarray(self.floats, dtype=float).ravel()
        object.__setattr__(self, "ints", ints)
        object.__setattr__(self, "floats", floats)
        for role in ROLES:
            fn = getattr(self, role)
            if fn is not None and not callable(fn):
                raise ValueError(f"Kernel {self.name or '?'}: {role} must be a function, got {type(fn).__name__}")
            if fn is not None and _returns_value(fn):
                raise ValueError(
                    f"Kernel {self.name or '?'}: its {role} function returns a value; a kernel adds its contribution "
                    "into out (out[j] += …) and returns nothing (what it returns is dropped)"
                )
        if self.force is None and self.gradient is None and self.potential is None:
            raise ValueError(f"Kernel {self.name or '?'}: give at least one of force, gradient, potential")
        if not np.all(np.isfinite(floats)):
            raise ValueError(f"Kernel {self.name or '?'}: floats must be finite")

    def roles(self) -> list[tuple[str, Callable]]:
        """The (role, function) pairs given, in the order force, gradient, potential."""
        return [(role, getattr(self, role)) for role in ROLES if getattr(self, role) is not None]


#: one ast.parse at a time: two threads building their first Simulators of one System hit "AST constructor
#: recursion depth mismatch" (a SystemError from CPython 3.11's parser, gh-106905) about once in 800 tries
_PARSING = threading.Lock()


def _returns_value(fn: Callable) -> bool:
    """Whether a kernel's source returns a value (a contract breach: the engine reads only ``out``); False when
    its source cannot be read."""
    try:
        source = textwrap.dedent(inspect.getsource(getattr(fn, "py_func", fn)))
        with _PARSING:  # CPython 3.11's parser is not safe across threads (gh-106905)
            tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError):
        return False
    if not tree.body or not isinstance(tree.body[0], ast.FunctionDef):
        return False
    stack = list(tree.body[0].body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue  # its own returns
        if isinstance(node, ast.Return) and node.value is not None:
            if not (isinstance(node.value, ast.Constant) and node.value.value is None):
                return True
        stack.extend(ast.iter_child_nodes(node))
    return False


class NonFinite(ArithmeticError):
    """A kernel called as Python returned NaN or inf at a finite state (:class:`mbvi.engine.callbacks.Callback`):
    its own fault, named as its law's."""


@dataclass(frozen=True)
class PythonKernel(Kernel):
    """A :class:`Kernel` whose functions are called as Python from the compiled loop (not compiled by numba).

    The engine makes one for a law whose :meth:`mbvi.ForceLaw.compiled` returns None (:func:`numpy_kernels`) and
    for a kernel numba cannot compile; a plugin may give one too.
    """


def kernel_as_numpy(fn: Callable, part: Kernel, role: str) -> Callable:
    """A kernel function to call as Python: the part's fallback for ``role``, or a numba dispatcher's own Python
    function."""
    if part.fallback is not None and getattr(part.fallback, role) is not None:
        return getattr(part.fallback, role)
    return getattr(fn, "py_func", fn)


def numpy_kernels(law, name: str) -> PythonKernel:
    """The kernels of a law without compiled ones: its NumPy ``force``, ``gradient`` and ``potential``, adapted
    to the contract (each adds into ``out``; a wrong shape or a non-finite value is an error naming ``name``)."""
    nq = law.nq

    def checked(value, what: str) -> np.ndarray:
        value = np.asarray(value, dtype=float)
        if value.shape != (nq,):
            raise ValueError(f"{name}: {what} returned shape {value.shape}, expected ({nq},)")
        return value

    def force(q, v, t, ints, floats, out):
        out += checked(law.force(q, v, t), "force(q, v, t)")

    def gradient(q, v, t, ints, floats, out):
        out += checked(law.gradient(q), "gradient(q)")

    def potential(q, v, t, ints, floats, out):
        out[0] += float(law.potential(q))

    return PythonKernel(
        force=force if law.has_force else None,
        gradient=gradient if law.has_potential else None,
        potential=potential if law.has_potential else None,
        name=name,
    )
