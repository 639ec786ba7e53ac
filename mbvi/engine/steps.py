"""The compiled time loop of integrator plugins: their own step, called through one fixed signature.

An integrator plugin that is not a composition supplies its step as a
numba-compilable function (the contract of :mod:`mbvi.engine.api`)::

    def step(model, ws, q, v, t, h, params) -> int

mbvi wraps it in a C function of :data:`mbvi.engine.callbacks.STEP_SIGNATURE`
(cached on disk by the hash of its code, :func:`mbvi.engine.callbacks.compiled_step`),
and :func:`run_steps` — compiled once, for every plugin — calls it through its
address at every step: the plugin's run is one compiled call, with no Python
inside its time loop, and a new plugin never recompiles the engine.
"""

from __future__ import annotations

import math

from llvmlite import ir
from numba import types as nt
from numba.extending import intrinsic

from mbvi.engine import kernels as K
from mbvi.engine.fields import RF, RK, ST, WK, M
from mbvi.engine.kernels import jit
from mbvi.engine.kernels import workspace_view as _buf

__all__ = ["run_steps"]


@intrinsic
def _call_step(typingctx, addr, I, F, WI, WS, S, q, v, t, h, p):
    """Call the step at ``addr`` (:data:`mbvi.engine.callbacks.STEP_SIGNATURE`) on the arrays' data; its status."""
    sig = nt.int32(addr, I, F, WI, WS, S, q, v, t, h, p)

    def codegen(context, builder, signature, args):
        i64, f64 = ir.IntType(64), ir.DoubleType()
        ip, fp = i64.as_pointer(), f64.as_pointer()
        fnty = ir.FunctionType(ir.IntType(32), [ip, i64, fp, i64, ip, i64, fp, i64, fp, i64, fp, fp, i64, f64, f64,
                                                 fp, i64])  # fmt: skip
        fptr = builder.inttoptr(args[0], fnty.as_pointer())

        def data(k):
            a = context.make_array(signature.args[k])(context, builder, args[k])
            return a.data, a.nitems

        (Id, nI), (Fd, nF), (WId, nWI), (WSd, nWS), (Sd, nS) = data(1), data(2), data(3), data(4), data(5)
        (qd, nq), (vd, _), (pd, np_) = data(6), data(7), data(10)
        return builder.call(fptr, [Id, nI, Fd, nF, WId, nWI, WSd, nWS, Sd, nS, qd, vd, nq, args[8], args[9], pd, np_])

    return sig, codegen


@jit  # allocates nothing: no reference counting on its arrays (the plugin's own step may)
def run_steps(addr, model, state, scratch, kparams, steps, params, out):
    """Steps ``steps[RK.K0]`` … ``steps[RK.KSTOP]`` − 1 of a run, each the plugin step at ``addr``.

    Parameters
    ----------
    addr : int
        The step's C function (:func:`mbvi.engine.callbacks.compiled_step`).
    model : tuple
        ``(I, F)``: the configuration model with every active row (:attr:`mbvi.engine.model.Model.Iq`).
    state : tuple
        ``(q, v, WI, WS)``: the state (stepped in place; on failure the failing step's start) and the workspace.
    scratch : ndarray, (rows, nq)
        The plugin's own rows.
    kparams : ndarray
        The plugin's parameters (:meth:`mbvi.Integrator.kernel_params`).
    steps, params : ndarray
        The run's integers and floats (:data:`mbvi.engine.fields.RK`, :data:`~mbvi.engine.fields.RF`).
    out : tuple
        ``(Q, V, Wk, info)`` as in :func:`mbvi.engine.loop.run_rattle`. The work of the non-conservative forces is
        measured beside the plugin's step, by the trapezoidal rule ½ (F(q₀, v₀, t) + F(q₁, v₁, t + h))·(q₁ − q₀)
        (one more force evaluation a step, and only with such forces): a forced run is judged by its balance as a
        built-in's is (a plugin's damped body that sped up, 0.5 J to 3.4 J, passed unjudged).
    """
    I, F = model
    q, v, WI, WS = state
    Q, V, Wk, info = out
    k, kstop, nsteps, save_every = steps[RK.K0], steps[RK.KSTOP], steps[RK.NSTEPS], steps[RK.SAVE_EVERY]
    j = steps[RK.J0]
    t0, h = params[RF.T0], params[RF.H]
    K.loop_start(I, WI, WS, steps, Wk)
    nq = I[M.NQ]
    qb, vb = _buf(WI, WS, WK.QB, nq), _buf(WI, WS, WK.VB, nq)
    # the force at the step's start and at its end (slots the plugin API leaves alone)
    f0, f1 = _buf(WI, WS, WK.F1, nq), _buf(WI, WS, WK.VNEW, nq)
    measure = I[M.HAS_F] != 0
    if measure:
        K.nonconservative_force(I, F, q, v, t0 + k * h, f0)
    status = ST.DONE
    while k < kstop:
        K.copy_into(qb, q)
        K.copy_into(vb, v)
        code = _call_step(addr, I, F, WI, WS, scratch, q, v, t0 + k * h, h, kparams)
        status = ST.DONE if code == 0 else ST.SHAKE_FAILED
        if status == ST.DONE and not K.finite(q, v):
            status = ST.NONFINITE
        if status != ST.DONE:
            K.copy_into(q, qb)
            K.copy_into(v, vb)
            break
        if measure:
            K.nonconservative_force(I, F, q, v, t0 + (k + 1) * h, f1)
            acc, end = 0.0, 0.0
            for i in range(nq):
                acc += f0[i] * (q[i] - qb[i])
                end += f1[i] * (q[i] - qb[i])
            # a load that cannot be evaluated at the step's end (it fails at t_end, where only the work reads it;
            # elsewhere the next step meets it and says so): that step's work from its start's force alone
            WS[WI[WK.WORK]] += 0.5 * (acc + end) if abs(end) < math.inf else acc
            K.copy_into(f0, f1)
        k += 1
        if k % save_every == 0 or k == nsteps:
            K.save_state(Q, V, Wk, j, q, v, WI, WS)
            j += 1
    K.loop_report(info, status, k, j, WI, Wk, WS)
