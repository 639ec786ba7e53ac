"""Loads given as functions, as kernels of the engine's contract: compiled with numba where they allow it.

Every ``ExternalForce``/``ExternalTorque`` whose value is a callable ``f(t)``
or ``f(t, state)`` becomes one force kernel (:mod:`mbvi.engine.contract`)
that the compiled loop calls at every force evaluation:

* **compiled** — mbvi compiles the function with numba (``numba.njit``) against
  the compiled ``StateView`` of :mod:`mbvi.engine.stateview`, whose accessors
  resolve the body and joint names the function uses when it is compiled. The
  kernel is cached on disk, keyed by the function's code, the constants it
  reads and the names it resolves: a controller compiles once per machine (a
  second or two), and a scene with other geometry but the same names reuses it.
* **called as Python** — a function numba cannot compile (it calls plain Python
  functions or libraries, builds dicts, uses objects…) is called from inside
  the compiled loop, one Python call per evaluation, over the NumPy
  :class:`mbvi.loads.StateView`. The log says why (logger ``"mbvi"``, once per
  element).

Either way a controller that raises, returns NaN/inf or something other than
3 numbers stops the run with a :class:`mbvi.errors.LoadError` (a
:class:`mbvi.SolverError`) naming the element, the time and what went wrong —
for the compiled form, the message of the function's own Python form called
again at the failing time and state (:class:`LoadFailure`).

:func:`load_kernels` also packs an *override* (``floats[F_OVERRIDE:F_VALUE+3]``)
that :class:`mbvi.Simulator` sets to hold a value given by ``set_load``.
"""

from __future__ import annotations

import hashlib
import logging
import types
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from mbvi.bodies import WORLD
from mbvi.engine.contract import Kernel, PythonKernel
from mbvi.kinematics import angle_frame
from mbvi.loads import call_load, state_view_factory

__all__ = ["LoadFailure", "compiled_view", "load_kernels", "names_read"]

log = logging.getLogger("mbvi")

F_ANCHOR, F_OVERRIDE, F_VALUE = 0, 3, 4  # as mbvi.engine.stateview (numba-free here)


def _strings(fn: Any, depth: int = 0, seen: set | None = None) -> Iterator[str]:
    """The string constants a function's compiled code can see: literals, closure cells, default arguments (a
    controller made in a loop binds its joint's name as ``jn=jn``), the globals it reads."""
    seen = set() if seen is None else seen
    fn = getattr(fn, "py_func", fn)
    code = getattr(fn, "__code__", None)
    if code is None or id(code) in seen or depth > 4:
        return
    seen.add(id(code))
    stack = [code]
    while stack:
        c = stack.pop()
        for const in c.co_consts:
            if isinstance(const, str):
                yield const
            elif isinstance(const, tuple):
                yield from (x for x in const if isinstance(x, str))
            elif isinstance(const, types.CodeType):
                stack.append(const)
    values = [cell.cell_contents for cell in (fn.__closure__ or ()) if _filled(cell)]
    values += [*(getattr(fn, "__defaults__", None) or ()), *(getattr(fn, "__kwdefaults__", None) or {}).values()]
    values += [fn.__globals__[n] for n in code.co_names if n in getattr(fn, "__globals__", {})]
    for value in values:
        if isinstance(value, str):
            yield value
        elif isinstance(value, tuple):
            yield from (x for x in value if isinstance(x, str))
        elif callable(value) and hasattr(getattr(value, "py_func", value), "__code__"):
            yield from _strings(value, depth + 1, seen)


def _filled(cell) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True


def names_read(func: Callable, layout: Any) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """The bodies and (revolute or prismatic) joints of ``layout`` whose names are string constants of ``func``.

    These are the names a compiled view can resolve (sorted, so the compiled code depends only on them); the
    bodies include those of the joints named.
    """
    found = set(_strings(func))
    moving = ("revolute", "prismatic")
    joints = tuple(sorted((n, j.kind) for n, j in layout.joint_frames.items() if n in found and j.kind in moving))
    ends = {b for n, _ in joints for b in (layout.joint_frames[n].a, layout.joint_frames[n].b)}
    bodies = tuple(sorted(n for n in found | ends if n in layout.bodies))
    return bodies, joints


class LoadFailure:
    """The failure record of one compiled load: the time and state of its first failed evaluation.

    The compiled kernel writes ``buffer`` = (flag, t, q, v) when the function raised or returned something other
    than 3 finite numbers; :attr:`error` then calls the function's Python form at that time and state for its
    own message (a ``ValueError`` naming the element, from :func:`mbvi.loads.call_load`).
    """

    role = "force"

    def __init__(self, owner: str, attr: str, func: Callable, arity: int, view: Callable, nq: int) -> None:
        self.name, self.attr, self.func, self.arity, self.view, self.nq = owner, attr, func, arity, view, nq
        self.buffer = np.zeros(2 + 2 * nq)
        self._error: Exception | None = None

    @property
    def address(self) -> int:
        """Address of :attr:`buffer` (the compiled kernel writes there)."""
        return int(self.buffer.ctypes.data)

    def reset(self) -> None:
        """Forget a failure (before a new run)."""
        self.buffer[0] = 0.0
        self._error = None

    @property
    def time(self) -> float:
        """When the first failure happened, s (NaN when none did)."""
        return float(self.buffer[1]) if self.buffer[0] else float("nan")

    @property
    def error(self) -> Exception | None:
        """The failure as a ``ValueError`` naming the element, the time and the function's message (None: none)."""
        if not self.buffer[0]:
            return None
        if self._error is None:
            t, nq = float(self.buffer[1]), self.nq
            q, v = self.buffer[2 : 2 + nq].copy(), self.buffer[2 + nq :].copy()
            py = getattr(self.func, "py_func", self.func)
            try:
                call_load(py, self.arity, t, self.view(q, v) if self.arity == 2 else None, self.name, self.attr)
            except ValueError as exc:
                self._error = exc
            else:
                args = f"t={t:g}" if self.arity == 1 else f"t={t:g}, state"
                self._error = ValueError(
                    f"{self.name}: {self.attr}({args}) raised an exception or returned something other than 3 finite "
                    "numbers in its compiled form (its Python form did not; run it with NUMBA_DISABLE_JIT=1 to see)"
                )
        return self._error


def _apply(q: np.ndarray, target: tuple[int, bool, np.ndarray], torque: bool, f: np.ndarray, out: np.ndarray) -> None:
    """What the compiled kernel adds (:func:`mbvi.engine.stateview.apply`), in NumPy."""
    o, rigid, anchor = target
    if torque:  # ½ (S⁻¹ τ) × rᵢ: exactly τ off the rotation group too (the compiled kernel's operations, bit for bit)
        from mbvi.engine.spin import spin_solve

        tau = np.array(spin_solve.py_func(q, o + 3, o + 6, o + 9, float(f[0]), float(f[1]), float(f[2])))
        r = q[o + 3 : o + 12].reshape(3, 3)
        out[o + 3 : o + 12] += 0.5 * np.cross(tau[None, :], r).ravel()
        return
    out[o : o + 3] += f
    if rigid:
        out[o + 3 : o + 12] += np.outer(anchor, f).ravel()


def _python_kernel(owner: str, attr: str, func: Callable, arity: int, view: Callable, target, torque) -> PythonKernel:
    def force(q, v, t, ints, floats, out):
        if floats[F_OVERRIDE]:
            f = np.array(floats[F_VALUE : F_VALUE + 3])
        else:
            f = call_load(func, arity, t, view(q, v) if arity == 2 else None, owner, attr)
        _apply(q, target, torque, f, out)

    return PythonKernel(force=force, name=owner, source=f"its {attr} callable")


def load_kernels(loads: list, attr: str, layout: Any, torque: bool) -> list[Kernel]:
    """One force kernel per load given as a callable (see the module).

    Parameters
    ----------
    loads : list of (element, callable, int, ndarray)
        Each ``ExternalForce``/``ExternalTorque`` whose ``attr`` is a callable, with that callable, its calling
        form (1: ``f(t)``, 2: ``f(t, state)``) and its anchor (m, body frame, shape (3,)), as the law read them
        when the system was assembled (an element edited afterwards does not change an assembled system).
    attr : str
        ``"force"`` (N, at the element's anchor) or ``"torque"`` (N m).
    layout : mbvi.layout.Layout
        The coordinates.
    torque : bool
        The elements are torques.
    """
    from mbvi.engine import stateview
    from mbvi.engine.callbacks import named_apart

    nq = layout.nq
    view_np = state_view_factory(layout)
    out: list[Kernel] = []
    for e, func, arity, at in loads:
        rigid = layout.kind(e.body) == "rigid"
        o = layout.offset[e.body]
        anchor = np.zeros(3)
        if rigid and not torque:  # the point x + Σ aᵢ rᵢ, a = Vᵀ anchor (principal coordinates)
            anchor = _axes(layout, e.body).T @ np.asarray(at, float)
        target = (o, rigid, anchor)
        python = _python_kernel(e.owner, attr, func, arity, view_np, target, torque)
        failure = LoadFailure(e.owner, attr, func, arity, view_np, nq)
        view, ints, floats = compiled_view(func if arity == 2 else None, layout, failure.address, target, torque)
        salt = repr((view._mbvi_bodies, view._mbvi_joints))  # the names the compiled code resolved
        tag = _tag(func, salt, arity)
        try:
            user = named_apart(func, tag)
        except Exception as exc:  # not a function numba can take (a builtin, a callable object)
            log.warning("%s: its %s callable is not a function numba compiles (%s); it is called from the compiled "
                        "loop as Python instead, one call per evaluation", e.owner, attr, exc)  # fmt: skip
            out.append(_with_parameters(python, ints, floats))
            continue
        kernel = stateview.load_kernel(user, arity == 2, view, tag)
        name = getattr(func, "__qualname__", type(func).__name__)
        source = f"its {attr} callable {name}"
        out.append(Kernel(force=kernel, ints=ints, floats=floats, name=e.owner, source=source, fallback=python,
                          watch=failure, salt=salt))  # fmt: skip
    return out


def compiled_view(
    func: Callable | None,
    layout: Any,
    record_address: int = 0,
    target: tuple[int, bool, np.ndarray] = (0, False, np.zeros(3)),
    torque: bool = False,
    every_name: bool = False,
) -> tuple[type, np.ndarray, np.ndarray]:
    """The compiled view's class for the names ``func`` reads, and the kernel's ``ints``/``floats``.

    ``View(q, v, ints, floats)`` inside numba-compiled code is what ``func(t, state)`` gets as ``state``
    (:mod:`mbvi.engine.stateview`); ``func=None``: a view that names nothing (a load of ``t`` only), or with
    ``every_name`` every body and every revolute and prismatic joint (:class:`mbvi.Simulator`'s view).
    """
    from mbvi.engine import stateview

    if every_name:
        moving = ("revolute", "prismatic")
        joints = tuple((n, j.kind) for n, j in layout.joint_frames.items() if j.kind in moving)
        bodies = tuple(layout.bodies)
    else:
        bodies, joints = names_read(func, layout) if func is not None else ((), ())
    slot = {name: i for i, name in enumerate(bodies)}
    body_rows = [(layout.offset[b], layout.kind(b) == "rigid", _axes(layout, b)) for b in bodies]
    joint_rows = []
    for name, _ in joints:
        j = layout.joint_frames[name]
        u1, u2 = angle_frame(j) if j.kind == "revolute" else (_vec(j.u1_a), _vec(j.u2_a))
        frame = np.concatenate([u1, u2, _vec(j.u1_b), _vec(j.axis_a), _vec(j.anchor_a), _vec(j.anchor_b),
                                [j.initial_angle]])  # fmt: skip
        joint_rows.append((_slot(j.a, slot), _slot(j.b, slot), frame))
    ints, floats = stateview.pack(layout.nq, record_address, target, torque, body_rows, joint_rows)
    return stateview.view_class(bodies, joints), ints, floats


def _tag(func: Callable, salt: str, arity: int) -> str:
    """A hash of the load's code, the names its view resolves and its form: what names its compiled functions."""
    from mbvi.engine.callbacks import code_key

    py = getattr(func, "py_func", func)
    code = code_key(py) if hasattr(py, "__code__") else type(func).__qualname__
    return hashlib.sha256(repr((code, salt, arity)).encode()).hexdigest()[:16]


def _with_parameters(python: PythonKernel, ints: np.ndarray, floats: np.ndarray) -> PythonKernel:
    return PythonKernel(force=python.force, ints=ints, floats=floats, name=python.name, source=python.source)


def _vec(x) -> np.ndarray:
    return np.zeros(3) if x is None else np.asarray(x, dtype=float).reshape(3)


def _axes(layout: Any, name: str) -> np.ndarray:
    body = layout.bodies[name]
    return np.asarray(body.principal_axes, dtype=float) if layout.kind(name) == "rigid" else np.eye(3)


def _slot(body: str, slot: dict[str, int]) -> int:
    """A joint body's slot in the view (−1: the world)."""
    return -1 if body == WORLD else slot[body]
