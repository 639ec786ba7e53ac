"""One compiled call of the engine's loop at the cost of one argument: the arrays' addresses in a frame.

A call of a numba function from Python checks the type of every argument and
unboxes it: the loop's ~40 arrays (model, run state, saved states) cost about
3 µs per call, more than a pendulum's step. Stepping one step at a time from
Python (:class:`mbvi.Simulator`) pays that at every step. Here the same
compiled loop is called through its address, from a small compiled function
whose one argument is a *frame*: an int64 array holding the loop's address and
every array's data address and shape (:func:`frame`). The frame is built once
for a set of arrays and reused while they live.

The loop's code is not linked into the caller (it is called through its
address, as the kernels of :mod:`mbvi.engine.contract` are), so this adds
a fraction of a second of compiling, once per machine.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from llvmlite import ir
from numba import njit
from numba import types as nt
from numba.core import cgutils
from numba.core.callconv import excinfo_t
from numba.extending import intrinsic
from numba.np.arrayobj import populate_array

from mbvi.engine.fields import LB, RI, RK

__all__ = ["RUN_ARGS", "VIEW_ARGS", "address", "call", "call_steps", "direct", "frame", "view_arrays", "view_frame"]

_F1, _I1, _F2 = nt.Array(nt.float64, 1, "C"), nt.Array(nt.int64, 1, "C"), nt.Array(nt.float64, 2, "C")
#: the argument types of the loop's entry points: (model, scheme, state, steps, params, out) (mbvi.engine.runner)
RUN_ARGS = (
    nt.Tuple((_I1, _F1, _I1, _F1, _I1, _F1)),
    _F2,
    nt.Tuple((_F1, _F1, _F1, _F2, _I1, _F1, nt.UniTuple(_F1, LB.count))),
    _I1,
    _F1,
    nt.Tuple((_F2, _F2, _F1, _I1)),
)


def _leaves(ty) -> list:
    if isinstance(ty, nt.Array):
        return [ty]
    return [leaf for t in ty.types for leaf in _leaves(t)]


def _values(args) -> list:
    if isinstance(args, np.ndarray):
        return [args]
    return [leaf for a in args for leaf in _values(a)]


def direct(dispatcher, *example) -> Callable:
    """``dispatcher``'s compiled entry for the types of ``example``, called without numba's type dispatch.

    A numba dispatcher called from Python first finds the types of its arguments and the matching compiled
    version (~0.1 µs a call); the entry returned here is that version itself. Call it only with arguments of
    exactly ``example``'s types (it converts, it does not check): the fixed-type calls of a stepping loop.
    The dispatcher itself is returned when numba keeps no such entry.
    """
    from numba import typeof

    sig = tuple(typeof(a) for a in example)
    try:
        dispatcher.compile(sig)  # from numba's disk cache after the first time
        return dispatcher.overloads[sig].entry_point
    except Exception:  # pragma: no cover - numba's internals moved: the ordinary call works
        return dispatcher


def address(run) -> int | None:
    """The address of ``run``'s compiled code for :data:`RUN_ARGS` (a numba dispatcher), or None when it has none."""
    for sig, cres in run.overloads.items():
        if tuple(sig) == RUN_ARGS:
            return int(cres.library.get_pointer_to_function(cres.fndesc.llvm_func_name))
    return None


def frame(fn_address: int, args: tuple) -> np.ndarray | None:
    """The frame of a call: the loop's address, then each array's data address and shape, in :data:`RUN_ARGS`'s
    order; None when an array is not of its declared type (the caller then calls the dispatcher)."""
    values = _values(args)
    types = [leaf for t in RUN_ARGS for leaf in _leaves(t)]
    if len(values) != len(types):
        return None
    out = [fn_address]
    for a, ty in zip(values, types, strict=True):
        if a.ndim != ty.ndim or a.dtype != np.dtype(str(ty.dtype)) or not a.flags.c_contiguous or not a.flags.writeable:
            return None
        out += [a.ctypes.data, *a.shape]
    return np.array(out, dtype=np.int64)


def _reader(context, builder, data):
    """``take()`` → the frame's next int64; ``build(ty)`` → an array (or a tuple of them) from the next entries."""
    i64 = ir.IntType(64)
    pos = [0]

    def take():
        value = builder.load(builder.gep(data, [ir.Constant(i64, pos[0])]))
        pos[0] += 1
        return value

    def build(ty):
        if not isinstance(ty, nt.Array):
            return context.make_tuple(builder, ty, [build(t) for t in ty.types])
        ary = context.make_array(ty)(context, builder)
        ptr = builder.inttoptr(take(), ary.data.type)
        shape = [take() for _ in range(ty.ndim)]
        itemsize = context.get_abi_sizeof(context.get_data_type(ty.dtype))
        strides, stride = [], ir.Constant(i64, itemsize)
        for d in reversed(range(ty.ndim)):
            strides.insert(0, stride)
            stride = builder.mul(stride, shape[d])
        populate_array(ary, data=ptr, shape=shape, strides=strides, itemsize=ir.Constant(i64, itemsize),
                       meminfo=None)  # fmt: skip
        return ary._getvalue()

    return take, build


@intrinsic
def _call_frame(typingctx, fr):
    """Build every array of :data:`RUN_ARGS` from the frame and call the loop at its address; its status (0: ok)."""
    sig = nt.int32(fr)

    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        take, build = _reader(context, builder, data)
        fn_address = take()
        values = [build(ty) for ty in RUN_ARGS]
        call_conv = context.call_conv
        fnty = call_conv.get_function_type(nt.none, RUN_ARGS)
        fptr = builder.inttoptr(fn_address, fnty.as_pointer())
        retty = call_conv.get_return_type(nt.none).pointee
        retval = cgutils.alloca_once(builder, retty)
        builder.store(cgutils.get_null_value(retty), retval)
        excinfo = cgutils.alloca_once(builder, ir.PointerType(excinfo_t), name="excinfo")
        real = [retval, excinfo, *call_conv._get_arg_packer(RUN_ARGS).as_arguments(builder, values)]
        code = builder.call(fptr, real)
        return builder.trunc(code, ir.IntType(32))

    return sig, codegen


@intrinsic
def frame_arrays(typingctx, fr):
    """Every array of :data:`RUN_ARGS` from the frame (without the call): ``(model, scheme, state, steps, params,
    out)``."""
    sig = nt.Tuple(RUN_ARGS)(fr)

    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        take, build = _reader(context, builder, data)
        take()  # the loop's address
        return context.make_tuple(builder, signature.return_type, [build(ty) for ty in RUN_ARGS])

    return sig, codegen


#: the arrays of a state view read from Python: q, v (nq,), the view's ints and floats
VIEW_ARGS = nt.Tuple((_F1, _F1, _I1, _F1))


@intrinsic
def view_arrays(typingctx, fr):
    """(q, v, ints, floats) from a frame of their addresses and lengths (:func:`view_frame`)."""
    sig = VIEW_ARGS(fr)

    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        _, build = _reader(context, builder, data)
        return build(VIEW_ARGS)

    return sig, codegen


def view_frame(q: np.ndarray, v: np.ndarray, ints: np.ndarray, floats: np.ndarray) -> np.ndarray:
    """The frame :func:`view_arrays` reads (the arrays must outlive it)."""
    for a, kind in ((q, "f"), (v, "f"), (ints, "i"), (floats, "f")):
        if a.ndim != 1 or a.dtype.kind != kind or a.itemsize != 8 or not a.flags.c_contiguous:
            raise ValueError("view_frame: 1-d contiguous float64/int64 arrays expected")
    return np.array([q.ctypes.data, len(q), v.ctypes.data, len(v), ints.ctypes.data, len(ints), floats.ctypes.data,
                     len(floats)], dtype=np.int64)  # fmt: skip


@njit(cache=True)
def call(fr):
    """Call the loop described by the frame ``fr`` (:func:`frame`); 0 when it returned normally."""
    return _call_frame(fr)


@njit(cache=True)
def call_steps(fr, k0, kstop, j0):
    """Steps ``k0`` … ``kstop − 1`` of an open-ended run (every state saved, from slot ``j0``) through the frame
    ``fr``: the run's status (:data:`mbvi.engine.fields.ST`), −1 when the loop raised. The arguments a step from
    Python changes are set here, in compiled code (one array and three integers cross from Python)."""
    arrays = frame_arrays(fr)
    steps, info = arrays[3], arrays[5][3]
    steps[RK.K0] = k0
    steps[RK.KSTOP] = kstop
    steps[RK.NSTEPS] = kstop
    steps[RK.J0] = j0
    steps[RK.FRESH] = 0
    steps[RK.PROJECT] = 0
    if _call_frame(fr):
        return -1
    return info[RI.STATUS]
