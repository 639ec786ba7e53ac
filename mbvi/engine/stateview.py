"""The compiled ``StateView``: what a load of ``(t, state)`` reads, inside the compiled loop.

A user's load ``f(t, state)`` is compiled with numba against a view of the
current state (:func:`view_class`): a named tuple of the configuration ``q``,
the velocity ``v`` and the geometry of the bodies and joints the function
names, with the accessors of :class:`mbvi.loads.StateView` —
``position``, ``velocity``, ``rotation``, ``angular_velocity``, ``point``,
``joint_angle``, ``joint_rate``, ``joint_displacement``,
``joint_displacement_rate`` — and the fields ``q`` and ``v``.

Names resolve **at compile time**: ``state.joint_angle("hinge")`` compiles to
a read of the hinge's body offsets and axes, with no lookup at run time. A
name must therefore be a constant of the function (a literal, a closure
variable or a global string); an unknown name is a typing error, and the load
is then called from the loop as Python instead, where it gets the usual
``ValueError``.

The geometry lives in the kernel's ``ints``/``floats`` (the kernel contract,
:mod:`mbvi.engine.contract`), laid out by :func:`pack`; the compiled code
depends only on which names the function reads, so the same function compiles
once for every scene that names the same bodies and joints.

:func:`load_kernel` is a load as a kernel of the contract (force role): it
evaluates the function, checks it returned 3 finite numbers and adds the
generalized force of a world force at a body point (or of a world torque on a
rigid body) into ``out``. A failure — the function raised, returned NaN or
another length — writes the time and state into the kernel's failure record
(:data:`I_RECORD`, read back by the load's owner to name the element and
call the Python form for its own message) and NaN into ``out``, so the step
fails.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Callable

import numpy as np
from llvmlite import ir
from numba import carray, njit
from numba import types as nt
from numba.core.errors import TypingError
from numba.core.imputils import impl_ret_borrowed
from numba.extending import intrinsic, overload, overload_method

from mbvi.engine.fastcall import view_arrays
from mbvi.engine.spin import spin_solve

__all__ = [
    "F_ANCHOR",
    "F_HEAD",
    "F_OVERRIDE",
    "F_VALUE",
    "I_RECORD",
    "load_kernel",
    "pack",
    "record_size",
    "view_class",
]

# ints: failure record's address, nq, the loaded body's offset and rigid flag, torque flag, #bodies, #joints
I_RECORD, I_NQ, I_OFFSET, I_RIGID, I_TORQUE, I_NB, I_NJ, I_HEAD = range(8)
# floats: the anchor in principal coordinates (V^T a), an override flag and value (mbvi.Simulator.set_load)
F_ANCHOR, F_OVERRIDE, F_VALUE, F_HEAD = 0, 3, 4, 7
#: floats per body (its principal axes V, row-major) and per joint (u1_a, u2_a, u1_b, axis_a, anchor_a, anchor_b,
#: initial_angle)
BODY_FLOATS, JOINT_FLOATS = 9, 19
#: the view's fields: the state and the geometry (``ints``/``floats`` of the kernel)
FIELDS = ("q", "v", "geometry_ints", "geometry_floats")
WORLD_SLOT = -1


def record_size(nq: int) -> int:
    """Length of a load kernel's failure record: a flag, the time and the state (q, v) it failed at."""
    return 2 + 2 * nq


_classes: dict[tuple, type] = {}


def view_class(bodies: tuple[str, ...], joints: tuple[tuple[str, str], ...]) -> type:
    """The named-tuple class of the view over these bodies and (name, kind) joints, slots in the given order.

    The class carries the table the accessors resolve names with (``_mbvi_bodies``, ``_mbvi_joints``); one class
    per table, so numba types each table apart.
    """
    key = (tuple(bodies), tuple(joints))
    cls = _classes.get(key)
    if cls is None:
        cls = collections.namedtuple("StateView", FIELDS)
        cls._mbvi_bodies = {name: i for i, name in enumerate(bodies)}
        cls._mbvi_joints = {name: (kind, i) for i, (name, kind) in enumerate(joints)}
        _classes[key] = cls
    return cls


def pack(
    nq: int,
    record_address: int,
    target: tuple[int, bool, np.ndarray],
    torque: bool,
    bodies: list[tuple[int, bool, np.ndarray]],
    joints: list[tuple[int, int, np.ndarray]],
) -> tuple[np.ndarray, np.ndarray]:
    """A load kernel's ``ints`` and ``floats``.

    Parameters
    ----------
    nq : int
        Number of generalized coordinates.
    record_address : int
        Address of the failure record, a float64 buffer of :func:`record_size` entries.
    target : (offset, rigid, anchor)
        The loaded body's block offset in q, whether it is rigid, and the point of application in its principal
        frame (Vᵀ a, m; unused for a torque).
    torque : bool
        A world torque (N m) rather than a world force (N).
    bodies : list of (offset, rigid, V)
        The bodies the view names, in slot order; V (3, 3): principal axes as columns in the body frame.
    joints : list of (slot_a, slot_b, frame)
        The joints it names: body slots (−1 for the world) and the 19 floats u1_a, u2_a, u1_b, axis_a,
        anchor_a, anchor_b.
    """
    ints = [record_address, nq, target[0], int(target[1]), int(torque), len(bodies), len(joints)]
    floats = [*np.asarray(target[2], float).reshape(3), 0.0, 0.0, 0.0, 0.0]
    for offset, rigid, V in bodies:
        ints += [offset, int(rigid)]
        floats += list(np.asarray(V, float).reshape(9))
    for a, b, frame in joints:
        ints += [a, b]
        floats += list(np.asarray(frame, float).reshape(JOINT_FLOATS))
    return np.array(ints, dtype=np.int64), np.array(floats, dtype=float)


# ------------------------------------------------------------------------------------------ kinematics
@njit(inline="always")
def _body(ints, slot):
    """(offset, rigid) of body ``slot``; the world (−1): (−1, 0)."""
    if slot < 0:
        return -1, 0
    o = I_HEAD + 2 * slot
    return ints[o], ints[o + 1]


@njit
def _rotate(q, ints, floats, slot, a0, a1, a2):
    """R a for body ``slot`` (R = [r₁ r₂ r₃] Vᵀ; identity for particles and the world)."""
    off, rigid = _body(ints, slot)
    if not rigid:
        return a0, a1, a2
    vo = F_HEAD + BODY_FLOATS * slot
    x0 = x1 = x2 = 0.0
    for c in range(3):  # (Vᵀ a)_c times column r_c
        s = floats[vo + c] * a0 + floats[vo + 3 + c] * a1 + floats[vo + 6 + c] * a2
        j = off + 3 + 3 * c
        x0 += s * q[j]
        x1 += s * q[j + 1]
        x2 += s * q[j + 2]
    return x0, x1, x2


@njit
def _origin(x, ints, slot):
    off, _ = _body(ints, slot)
    if off < 0:
        return 0.0, 0.0, 0.0
    return x[off], x[off + 1], x[off + 2]


@njit
def _omega(q, v, ints, slot):
    """ω = ½ Σᵢ rᵢ × ṙᵢ of body ``slot`` (zero for particles and the world)."""
    off, rigid = _body(ints, slot)
    if not rigid:
        return 0.0, 0.0, 0.0
    w0 = w1 = w2 = 0.0
    for c in range(3):
        j = off + 3 + 3 * c
        r0, r1, r2, d0, d1, d2 = q[j], q[j + 1], q[j + 2], v[j], v[j + 1], v[j + 2]
        w0 += r1 * d2 - r2 * d1
        w1 += r2 * d0 - r0 * d2
        w2 += r0 * d1 - r1 * d0
    return 0.5 * w0, 0.5 * w1, 0.5 * w2


@njit
def _point(q, ints, floats, slot, a0, a1, a2):
    x0, x1, x2 = _origin(q, ints, slot)
    p0, p1, p2 = _rotate(q, ints, floats, slot, a0, a1, a2)
    return x0 + p0, x1 + p1, x2 + p2


@njit
def _joint(ints, floats, j):
    """Slots of the joint's bodies and where its 19 frame floats start."""
    nb = ints[I_NB]
    o = I_HEAD + 2 * nb + 2 * j
    return ints[o], ints[o + 1], F_HEAD + BODY_FLOATS * nb + JOINT_FLOATS * j


@njit
def _frame(q, ints, floats, slot, fo):
    return _rotate(q, ints, floats, slot, floats[fo], floats[fo + 1], floats[fo + 2])


@njit
def joint_angle(q, ints, floats, j):
    """Revolute joint angle θ = θ₀ + atan2((R_a u₂)·(R_b u₁), (R_a u₁)·(R_b u₁)), rad, with u₁, u₂ of a turned by
    the joint's initial angle θ₀ when packed (:func:`mbvi.loadkernels`): within π of θ₀, and θ₀ itself at the
    initial configuration, whatever turn it names."""
    a, b, fo = _joint(ints, floats, j)
    w0, w1, w2 = _frame(q, ints, floats, b, fo + 6)
    c0, c1, c2 = _frame(q, ints, floats, a, fo)
    s0, s1, s2 = _frame(q, ints, floats, a, fo + 3)
    return floats[fo + 18] + math.atan2(s0 * w0 + s1 * w1 + s2 * w2, c0 * w0 + c1 * w1 + c2 * w2)


@njit
def joint_rate(q, v, ints, floats, j):
    """Revolute joint rate θ̇ = (R_a n)·(ω_b − ω_a), rad/s."""
    a, b, fo = _joint(ints, floats, j)
    n0, n1, n2 = _frame(q, ints, floats, a, fo + 9)
    wa0, wa1, wa2 = _omega(q, v, ints, a)
    wb0, wb1, wb2 = _omega(q, v, ints, b)
    return n0 * (wb0 - wa0) + n1 * (wb1 - wa1) + n2 * (wb2 - wa2)


@njit
def _separation(q, ints, floats, a, b, fo):
    pa0, pa1, pa2 = _point(q, ints, floats, a, floats[fo + 12], floats[fo + 13], floats[fo + 14])
    pb0, pb1, pb2 = _point(q, ints, floats, b, floats[fo + 15], floats[fo + 16], floats[fo + 17])
    return pb0 - pa0, pb1 - pa1, pb2 - pa2


@njit
def joint_displacement(q, ints, floats, j):
    """Prismatic joint displacement d = (P_b − P_a)·(R_a n), m."""
    a, b, fo = _joint(ints, floats, j)
    d0, d1, d2 = _separation(q, ints, floats, a, b, fo)
    n0, n1, n2 = _frame(q, ints, floats, a, fo + 9)
    return d0 * n0 + d1 * n1 + d2 * n2


@njit
def joint_displacement_rate(q, v, ints, floats, j):
    """d/dt of :func:`joint_displacement`: (Ṗ_b − Ṗ_a)·n + (P_b − P_a)·(ω_a × n), m/s."""
    a, b, fo = _joint(ints, floats, j)
    d0, d1, d2 = _separation(q, ints, floats, a, b, fo)
    n0, n1, n2 = _frame(q, ints, floats, a, fo + 9)
    wa0, wa1, wa2 = _omega(q, v, ints, a)
    wb0, wb1, wb2 = _omega(q, v, ints, b)
    pa0, pa1, pa2 = _rotate(q, ints, floats, a, floats[fo + 12], floats[fo + 13], floats[fo + 14])
    pb0, pb1, pb2 = _rotate(q, ints, floats, b, floats[fo + 15], floats[fo + 16], floats[fo + 17])
    va0, va1, va2 = _origin(v, ints, a)
    vb0, vb1, vb2 = _origin(v, ints, b)
    e0 = vb0 + (wb1 * pb2 - wb2 * pb1) - va0 - (wa1 * pa2 - wa2 * pa1)
    e1 = vb1 + (wb2 * pb0 - wb0 * pb2) - va1 - (wa2 * pa0 - wa0 * pa2)
    e2 = vb2 + (wb0 * pb1 - wb1 * pb0) - va2 - (wa0 * pa1 - wa1 * pa0)
    c0, c1, c2 = wa1 * n2 - wa2 * n1, wa2 * n0 - wa0 * n2, wa0 * n1 - wa1 * n0
    return e0 * n0 + e1 * n1 + e2 * n2 + d0 * c0 + d1 * c1 + d2 * c2


@njit
def rotation(q, ints, floats, slot):
    """Body-to-world rotation in the user's body frame, (3, 3)."""
    R = np.empty((3, 3))
    for k in range(3):
        e0, e1, e2 = (1.0 if k == 0 else 0.0), (1.0 if k == 1 else 0.0), (1.0 if k == 2 else 0.0)
        R[0, k], R[1, k], R[2, k] = _rotate(q, ints, floats, slot, e0, e1, e2)
    return R


# ------------------------------------------------------------------------------------ the accessors
def _table(state) -> type | None:
    cls = getattr(state, "instance_class", None)
    return cls if cls is not None and hasattr(cls, "_mbvi_bodies") else None


def _literal(name, what: str) -> str:
    if not isinstance(name, nt.StringLiteral):
        raise TypingError(f"state.{what}(name): the name must be a constant string (a literal, a closure variable or "
                          "a default argument)")  # fmt: skip
    return name.literal_value


def _body_slot(cls: type, name, what: str) -> int:
    value = _literal(name, what)
    if value == "world":
        return WORLD_SLOT
    if value not in cls._mbvi_bodies:
        raise TypingError(f"state.{what}({value!r}): unknown body; the view knows {sorted(cls._mbvi_bodies)}")
    return cls._mbvi_bodies[value]


def _joint_slot(cls: type, name, kind: str, what: str) -> int:
    value = _literal(name, what)
    got = cls._mbvi_joints.get(value)
    if got is None or got[0] != kind:
        known = sorted(k for k, (kd, _) in cls._mbvi_joints.items() if kd == kind)
        raise TypingError(f"state.{what}({value!r}): unknown {kind} joint; the view knows {known}")
    return got[1]


def _named(impl: Callable, what: str, slot: int) -> Callable:
    """An accessor's implementation named by its slot (the code differs by slot only; see :func:`load_kernel`)."""
    impl.__qualname__ = f"stateview_{what}_slot{slot if slot >= 0 else 'world'}"
    return impl


def _body_accessor(what: str, impl_of: Callable[[int], Callable]) -> None:
    @overload_method(nt.NamedTuple, what, prefer_literal=True)
    def _typer(state, name):
        cls = _table(state)
        if cls is None:
            return None
        slot = _body_slot(cls, name, what)
        return _named(impl_of(slot), what, slot)


def _joint_accessor(what: str, kind: str, impl_of: Callable[[int], Callable]) -> None:
    @overload_method(nt.NamedTuple, what, prefer_literal=True)
    def _typer(state, name):
        cls = _table(state)
        if cls is None:
            return None
        slot = _joint_slot(cls, name, kind, what)
        return _named(impl_of(slot), what, slot)


def _position(slot):
    def impl(state, name):
        x0, x1, x2 = _origin(state.q, state.geometry_ints, slot)
        return np.array([x0, x1, x2])

    return impl


def _velocity(slot):
    def impl(state, name):
        x0, x1, x2 = _origin(state.v, state.geometry_ints, slot)
        return np.array([x0, x1, x2])

    return impl


def _rotation(slot):
    def impl(state, name):
        return rotation(state.q, state.geometry_ints, state.geometry_floats, slot)

    return impl


def _angular_velocity(slot):
    def impl(state, name):
        w0, w1, w2 = _omega(state.q, state.v, state.geometry_ints, slot)
        return np.array([w0, w1, w2])

    return impl


def _angle(slot):
    return lambda state, name: joint_angle(state.q, state.geometry_ints, state.geometry_floats, slot)


def _rate(slot):
    return lambda state, name: joint_rate(state.q, state.v, state.geometry_ints, state.geometry_floats, slot)


def _displacement(slot):
    return lambda state, name: joint_displacement(state.q, state.geometry_ints, state.geometry_floats, slot)


def _displacement_rate(slot):
    def impl(state, name):
        return joint_displacement_rate(state.q, state.v, state.geometry_ints, state.geometry_floats, slot)

    return impl


_body_accessor("position", _position)
_body_accessor("velocity", _velocity)
_body_accessor("rotation", _rotation)
_body_accessor("angular_velocity", _angular_velocity)
_joint_accessor("joint_angle", "revolute", _angle)
_joint_accessor("joint_rate", "revolute", _rate)
_joint_accessor("joint_displacement", "prismatic", _displacement)
_joint_accessor("joint_displacement_rate", "prismatic", _displacement_rate)


@overload_method(nt.NamedTuple, "point", prefer_literal=True)
def _point_typer(state, name, anchor):
    cls = _table(state)
    if cls is None:
        return None
    slot = _body_slot(cls, name, "point")

    def impl(state, name, anchor):
        x0, x1, x2 = _point(state.q, state.geometry_ints, state.geometry_floats, slot, anchor[0], anchor[1], anchor[2])
        return np.array([x0, x1, x2])

    return _named(impl, "point", slot)


# --------------------------------------------------------------------------------------- the kernel
@intrinsic
def read_only(typingctx, arr):
    """The same array, typed read-only: a load's view lends it the run's own q and v (no copy), and code that
    writes into them does not compile (it is then called as Python, where the view's arrays refuse it too)."""
    if not isinstance(arr, nt.Array):
        return None
    frozen = arr.copy(readonly=True)

    def codegen(context, builder, signature, args):
        return impl_ret_borrowed(context, builder, frozen, args[0])

    return frozen(arr), codegen


@intrinsic
def _record_pointer(typingctx, address):
    """The failure record at ``address`` (an int64) as a float64 pointer."""
    sig = nt.CPointer(nt.float64)(address)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], ir.DoubleType().as_pointer())

    return sig, codegen


@njit
def fail(q, v, t, ints, out):
    """Keep the first failure's time and state in the record; NaN into ``out`` (the step fails)."""
    nq = ints[I_NQ]
    rec = carray(_record_pointer(ints[I_RECORD]), 2 + 2 * nq)
    if rec[0] == 0.0:
        rec[1] = t
        for i in range(nq):
            rec[2 + i] = q[i]
            rec[2 + nq + i] = v[i]
        rec[0] = 1.0
    for i in range(out.shape[0]):
        out[i] = np.nan


@njit
def apply(q, ints, floats, f0, f1, f2, out):
    """Add the generalized force of a world force (N) at the body point, or of a world torque (N m), into out."""
    off, rigid = ints[I_OFFSET], ints[I_RIGID]
    if ints[I_TORQUE]:  # ½ (S⁻¹ τ) × rᵢ on each rotation column: exactly τ, off the rotation group too
        f0, f1, f2 = spin_solve(q, off + 3, off + 6, off + 9, f0, f1, f2)
        for c in range(3):
            j = off + 3 + 3 * c
            r0, r1, r2 = q[j], q[j + 1], q[j + 2]
            out[j] += 0.5 * (f1 * r2 - f2 * r1)
            out[j + 1] += 0.5 * (f2 * r0 - f0 * r2)
            out[j + 2] += 0.5 * (f0 * r1 - f1 * r0)
        return
    out[off] += f0
    out[off + 1] += f1
    out[off + 2] += f2
    if rigid:  # the point x + Σ aᵢ rᵢ: aᵢ f on column i
        for c in range(3):
            a = floats[F_ANCHOR + c]
            j = off + 3 + 3 * c
            out[j] += a * f0
            out[j + 1] += a * f1
            out[j + 2] += a * f2


def as_number(x):
    """A load's component as a float: a real number only (not a bool, a string, a complex…; a typing error)."""
    return float(x)


@overload(as_number)
def _as_number(x):
    if isinstance(x, (nt.Boolean, nt.Complex)) or not isinstance(x, (nt.Integer, nt.Float)):
        raise TypingError(f"a load must return 3 real numbers; one component is {x}")
    return lambda x: float(x)


def load_kernel(user: Callable, reads_state: bool, view: type, tag: str) -> Callable:
    """The force kernel (contract signature) of a load ``user(t)`` or ``user(t, state)`` (a numba dispatcher).

    The kernel is a plain function; :func:`mbvi.engine.callbacks.compiled` compiles it (and ``user`` in it).
    ``tag`` (a hash of the user's code and the names its view resolves) goes into the generated functions'
    names: numba names compiled code by module, qualified name and argument types, and code loaded from its
    disk cache keeps the counter of the process that compiled it, so every kernel's functions must be named
    apart or two kernels cached by different processes can link to one another's code.
    """
    if reads_state:

        def evaluate(t, q, v, ints, floats):
            return user(t, view(read_only(q), read_only(v), read_only(ints), read_only(floats)))

    else:

        def evaluate(t, q, v, ints, floats):
            return user(t)

    evaluate.__qualname__ = f"load_{tag}.evaluate"
    evaluate = njit(evaluate)

    def kernel(q, v, t, ints, floats, out):
        if floats[F_OVERRIDE] != 0.0:
            apply(q, ints, floats, floats[F_VALUE], floats[F_VALUE + 1], floats[F_VALUE + 2], out)
            return
        ok = True
        f0 = f1 = f2 = np.nan
        try:
            f = evaluate(t, q, v, ints, floats)
            if len(f) == 3:
                f0, f1, f2 = as_number(f[0]), as_number(f[1]), as_number(f[2])
            else:
                ok = False
        except Exception:  # any exception of the user's code: the Python form gives the message
            ok = False
        if ok and math.isfinite(f0) and math.isfinite(f1) and math.isfinite(f2):
            apply(q, ints, floats, f0, f1, f2, out)
        else:
            fail(q, v, t, ints, out)

    kernel.__qualname__ = f"load_{tag}.kernel"
    return kernel


# ------------------------------------------------------------------ the accessors called from Python
# mbvi.Simulator's live view reads the current state through these: one argument array, the frame of the
# state's and the view's arrays (mbvi.engine.fastcall.view_frame), and the slot: about 0.3 µs a call
@njit(cache=True)
def live_position(fr, slot, velocity):
    """Position (m) or, with ``velocity``, velocity (m/s) of body ``slot``'s origin, (3,)."""
    q, v, ints, _floats = view_arrays(fr)
    x0, x1, x2 = _origin(v if velocity else q, ints, slot)
    return np.array([x0, x1, x2])


@njit(cache=True)
def live_rotation(fr, slot):
    """Body-to-world rotation of body ``slot`` in its user frame, (3, 3)."""
    q, _v, ints, floats = view_arrays(fr)
    return rotation(q, ints, floats, slot)


@njit(cache=True)
def live_angular_velocity(fr, slot):
    """World-frame angular velocity of body ``slot``, rad/s, (3,)."""
    q, v, ints, _floats = view_arrays(fr)
    w0, w1, w2 = _omega(q, v, ints, slot)
    return np.array([w0, w1, w2])


@njit(cache=True)
def live_point(fr, slot, a0, a1, a2):
    """World position of the body-frame point (a0, a1, a2) of body ``slot``, m, (3,)."""
    q, _v, ints, floats = view_arrays(fr)
    x0, x1, x2 = _point(q, ints, floats, slot, a0, a1, a2)
    return np.array([x0, x1, x2])


@njit(cache=True)
def live_joint(fr, j, what):
    """Joint ``j``'s angle (``what`` 0, rad), angle rate (1, rad/s), displacement (2, m) or its rate (3, m/s)."""
    q, v, ints, floats = view_arrays(fr)
    if what == 0:
        return joint_angle(q, ints, floats, j)
    if what == 1:
        return joint_rate(q, v, ints, floats, j)
    if what == 2:
        return joint_displacement(q, ints, floats, j)
    return joint_displacement_rate(q, v, ints, floats, j)
