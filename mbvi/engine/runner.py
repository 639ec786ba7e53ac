"""Python side of a compiled run: a run's state and result as values, and the calls into the loop.

* :class:`RunState` is everything a run changes (MuJoCo's ``mjData``): the
  state, SHAKE's warm starts and the workspace. A run continued from a
  RunState takes exactly the steps one longer run would.
* :func:`advance` makes one compiled call from a RunState and returns a
  :class:`Advance` (status, steps taken, states saved, counters).
* :func:`run_batch` runs many initial states through the same compiled loop
  on every core.

Nothing here knows a scene, a ``System`` or an integrator: the callers
(:mod:`mbvi.integrators.compiled`, :mod:`mbvi.simulator`) gather the arrays
and turn outcomes into answers.
"""

from __future__ import annotations

import functools
import importlib
import itertools
import math
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from mbvi.engine import scheme as SC
from mbvi.engine.fields import LB, LT, RF, RI, RK, ST, WK, M, length

__all__ = [
    "Advance",
    "Advancer",
    "RunResult",
    "RunState",
    "advance",
    "call_frame",
    "entry",
    "nsave",
    "run_batch",
    "saved_states",
    "saved_steps",
    "threads",
]


def nsave(nsteps: int, save_every: int) -> int:
    """States a run of ``nsteps`` saves: the initial one, every ``save_every``-th, and the last."""
    return nsteps // save_every + 1 + (nsteps % save_every != 0)


def _hugepage_switch() -> Callable[[bool], bool] | None:
    """numpy's switch of its huge-page advice (``_set_madvise_hugepage``, numpy ≥ 1.20), or None."""
    for name in ("numpy._core.multiarray", "numpy.core.multiarray"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        switch = getattr(module, "_set_madvise_hugepage", None)
        if switch is not None:
            return switch
    return None


_HUGEPAGE = _hugepage_switch()
_HUGEPAGE_LOCK = threading.Lock()


@functools.cache
def physical_memory() -> float:
    """This machine's memory, bytes (inf where the OS does not say)."""
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return math.inf


#: the share of the machine's memory a run's saved states may take
MEMORY_SHARE = 0.5
#: arrays of a saved-state array's size a run holds at its peak: its positions and velocities, and the
#: trajectory's work of them (measured: a run whose arrays were 0.7 GiB each peaked at 2.43 GiB)
RUN_ARRAYS = 4
#: floats a run and its trajectory hold per saved state besides those arrays: its time, work, energies,
#: constraint error, momenta (3 + 3) and what saving it copies (measured: a pendulum, nq = 3, peaked at 6.8
#: arrays of its states while saving, where RUN_ARRAYS alone counted 4)
DERIVED_PER_STATE = 16


def check_memory(
    shape: tuple[int, ...],
    what: str = "the run's saved states",
    advice: str = "keep fewer (save_every), run shorter or fewer members",
    copies: int = 1,
) -> None:
    """A ValueError saying how much and what to change when ``copies`` float64 arrays of ``shape`` would take
    more than :data:`MEMORY_SHARE` of this machine's memory (rather than numpy's MemoryError, an out-of-memory
    kill, or minutes of swapping)."""
    need = 8.0 * math.prod(int(n) for n in shape) * copies
    have = physical_memory()
    if need > MEMORY_SHARE * have:
        each = f"{copies:.3g} arrays of " if copies > 1 else ""
        raise ValueError(
            f"{what}, {each}{' × '.join(str(int(n)) for n in shape)} numbers, would take {need / 2**30:.3g} GiB of "
            f"this machine's {have / 2**30:.3g} GiB: {advice}"
        )


def saved_states(shape: tuple[int, ...], zero: bool = False) -> np.ndarray:
    """A float64 array for a run's saved states, without numpy's huge-page advice.

    numpy advises the kernel to back every array of 4 MiB or more with huge pages
    (``madvise(MADV_HUGEPAGE)``). Where memory is fragmented, Linux then compacts
    memory to find them while the run first writes each page: measured, 0.25–0.34 s
    of system time for the 120 MB a 20-s run of a 32-link rigid chain saves, +12 µs
    a step (+45 %) in a process that had run other cases first. The 4 KiB pages of
    an unadvised array cost the same run 0.04–0.08 s, and the same in every process
    (within 3 % of huge pages' best case).

    Parameters
    ----------
    shape : tuple of int
        The array's shape, e.g. (saved states, nq).
    zero : bool, default: False
        Zero-filled (else uninitialized, as :func:`numpy.empty`).

    Returns
    -------
    ndarray of float64, shape ``shape``

    Raises
    ------
    ValueError
        When the run holding such states (:data:`RUN_ARRAYS` arrays of this size at its peak, and
        :data:`DERIVED_PER_STATE` floats a state) would take more
        than half of this machine's memory (saying how much, and what to change), rather than numpy's
        MemoryError, an out-of-memory kill or a machine swapping for minutes.
    """
    # (the run's peak, not this array's alone)
    check_memory(shape, copies=RUN_ARRAYS + DERIVED_PER_STATE / max(1, int(shape[-1])) if len(shape) else RUN_ARRAYS)
    make = np.zeros if zero else np.empty
    if _HUGEPAGE is None:
        return make(shape)
    with _HUGEPAGE_LOCK:  # the advice is numpy's global setting: off for this allocation only
        was = _HUGEPAGE(False)
        try:
            return make(shape)
        finally:
            _HUGEPAGE(was)


def saved_steps(count: int, nsteps: int, save_every: int) -> np.ndarray:
    """Step indices of the first ``count`` saved states."""
    k = np.minimum(np.arange(count) * save_every, nsteps)
    return k.astype(float)


@dataclass(frozen=True)
class RunResult:
    """What a run gives back (every integrator's :meth:`mbvi.Integrator.run`).

    Attributes
    ----------
    t : ndarray, (n,)
        Saved times, s.
    q, v : ndarray, (n, nq)
        Saved positions and velocities.
    work : ndarray, (n,) or None
        Work of the non-conservative forces up to each saved state, J (None when the run does not measure it).
    counters : dict of str to int
        How the run went: ``refined_steps`` (steps a fast body took in substeps), ``numpy_steps`` (steps the
        NumPy path took), ``shifted`` (singular factorizations), ``newton`` (full-Newton fallbacks).
    """

    t: np.ndarray
    q: np.ndarray
    v: np.ndarray
    work: np.ndarray | None = None
    counters: dict[str, int] = field(default_factory=dict)

    def ending_at(self, t: float, q: np.ndarray, v: np.ndarray, work: float | None = None) -> RunResult:
        """This result and the state (t, q, v) after it: a failed run's last good state, off its save grid.

        A run saved every n-th state lost up to n − 1 steps of its motion to a failure, all of it at n ≥ its
        steps (one frame at t0 in its error's trajectory). Nothing is appended at or before the last saved time,
        nor when this result measures work and ``work`` (J, up to that state) is not given.
        """
        if (len(self.t) and not t > self.t[-1]) or (self.work is not None and work is None):
            return self
        return RunResult(
            np.append(self.t, t),
            np.vstack([self.q, np.asarray(q, dtype=float)[None]]),
            np.vstack([self.v, np.asarray(v, dtype=float)[None]]),
            None if self.work is None else np.append(self.work, work),
            self.counters,
        )


#: the Lie loop's buffers of a system without rigid bodies: empty, never written, shared
_NO_BUFFERS = tuple(np.zeros(0) for _ in LB.fields)


@functools.lru_cache(maxsize=64)
def _buffer_lengths(nnz: int, nq: int, nv: int, n: int, nb: int) -> tuple[int, ...]:
    """The length of every Lie-loop buffer (:data:`mbvi.engine.fields.LB`) for these sizes."""
    sizes = {"NNZ": nnz, "NQ": nq, "NV": nv, "N": n, "NB": nb}
    return tuple(length(f.size, sizes) for f in LB.fields)


class RunState:
    """Everything a compiled run changes, kept between calls (MuJoCo's ``mjData``).

    Parameters
    ----------
    model : mbvi.engine.model.Model
        The model it runs.
    scheme : ndarray
        The method (:mod:`mbvi.engine.scheme`): how many warm-start rows it needs.
    q, v : ndarray, (nq,)
        The state to start from (copied).
    work : float, default: 0
        Work of the non-conservative forces so far, J.
    rows : int, optional
        The warm-start rows (``scheme``'s, :func:`mbvi.engine.scheme.rows_needed`, when not given).

    Attributes
    ----------
    q, v : ndarray
        The current state (the arrays the compiled loop steps in place).
    fresh : bool
        The workspace does not belong to (q, v) yet: the next call starts cold from it.
    """

    def __init__(self, model, scheme: np.ndarray, q: np.ndarray, v: np.ndarray, work: float = 0.0,
                 rows: int | None = None) -> None:  # fmt: skip
        I, Iv = model.I, model.Iv
        n, nv = int(Iv[M.N]), int(Iv[M.NQ])
        self.q = np.array(q, dtype=float)
        self.v = np.array(v, dtype=float)
        self.u = np.zeros(nv)  # the velocity coordinates of the Lie loop (unprojected between calls)
        self.lam = np.zeros((SC.rows_needed(scheme) if rows is None else rows, n))
        self._WI0 = Iv[Iv[M.WKOFF] : Iv[M.WKOFF] + WK.count]  # the workspace's start (a view of the model)
        self.WI = self._WI0.copy()
        self.WS = np.zeros(int(Iv[M.WS_SIZE]))
        if model.rigid:  # the Lie loop's buffers: views of one allocation
            ends = list(itertools.accumulate(_buffer_lengths(int(I[M.NNZ]), int(I[M.NQ]), nv, n,
                                                             int(model.IL[LT.NB])), initial=0))  # fmt: skip
            flat = np.zeros(ends[-1])
            self.bufs = tuple(flat[a:b] for a, b in itertools.pairwise(ends))
        else:
            self.bufs = _NO_BUFFERS  # never written: one set for every run state
        self.work = float(work)
        self.fresh = True

    def reset(self, q: np.ndarray, v: np.ndarray, work: float | None = None, *, new: bool = False) -> None:
        """Start again from (q, v): cold warm starts, a fresh workspace at the next call; with ``new``, the
        workspace's counters and state as a new RunState's too (a substep count that only grows, for one)."""
        self.q[:] = q
        self.v[:] = v
        self.lam[...] = 0.0
        if new:
            self.WI[:] = self._WI0
            self.WS[:] = 0.0
            for b in self.bufs:
                b[:] = 0.0
        if work is not None:
            self.work = float(work)
        self.fresh = True

    @property
    def arrays(self) -> tuple:
        """``(q, v, u, lam, WI, WS, bufs)``: what the compiled loop steps."""
        return (self.q, self.v, self.u, self.lam, self.WI, self.WS, self.bufs)


@dataclass(frozen=True)
class Advance:
    """The outcome of one compiled call (:func:`advance`).

    Attributes
    ----------
    status : int
        :data:`mbvi.engine.fields.ST` (``DONE``, or why it stopped; the state is then the failing step's start).
    step : int
        The step reached: the failing one, or ``kstop``.
    saved : int
        The next save slot.
    """

    status: int
    step: int
    saved: int


def entry(model, scheme: np.ndarray):
    """The compiled entry point that runs ``scheme`` on ``model``, or None (the implicit pair on a model whose rigid
    bodies step on SO(3): it runs on :func:`mbvi.engine.model.configuration_model` instead)."""
    kind = int(scheme[0, SC.KIND])
    if model.rigid:
        if kind != SC.RATTLE:
            return None
        return importlib.import_module("mbvi.engine.lieloop").run_lie
    loop = importlib.import_module("mbvi.engine.loop")  # safe when threads import it at once
    return loop.run_rattle if kind == SC.RATTLE else loop.run_implicit


def _params(t0: float, h: float, tol: float, length_scale: float, max_turn: float) -> np.ndarray:
    p = np.zeros(RF.count)
    p[RF.T0], p[RF.H], p[RF.TOL], p[RF.LENGTH], p[RF.MAX_TURN] = t0, h, tol, length_scale, max_turn
    return p


class Advancer:
    """Compiled calls on one :class:`RunState` and one set of saved-state arrays, as cheap as one call can be.

    The argument arrays are gathered once; when the loop's compiled code is at hand the calls go through its
    address with a frame of the arrays' addresses (:mod:`mbvi.engine.fastcall`: about 0.2 µs a call instead of
    3 µs of argument checks), else through the dispatcher.

    Parameters
    ----------
    model, scheme, rs
        The model, the method and the run state (stepped in place).
    out : tuple
        ``(Q, V, Wk, info)``: saved positions and velocities, the work so far (its last entry the running total)
        and the counters (:data:`mbvi.engine.fields.RI`).
    t0, h, tol, maxiter, length_scale, max_turn, save_every
        The run's start time (s), step (s), constraint tolerance, Newton iterations, length scale (m), largest
        turn per substep (rad) and how often it saves.
    """

    def __init__(
        self, model, scheme: np.ndarray, rs: RunState, out: tuple, *, t0: float, h: float, tol: float,
        maxiter: int, length_scale: float, max_turn: float, save_every: int = 1,
    ) -> None:  # fmt: skip
        self.model, self.scheme, self.rs = model, scheme, rs
        self.run = entry(model, scheme)
        self.steps = np.zeros(RK.count, dtype=np.int64)
        self.steps[RK.SAVE_EVERY], self.steps[RK.MAXITER] = save_every, maxiter
        self.params = _params(t0, h, tol, length_scale, max_turn)
        self.frame = None
        self.set_out(out)

    def set_out(self, out: tuple) -> None:
        """Save into these arrays from now on (e.g. larger ones)."""
        self.out = out
        self.Wk, self.info = out[2], out[3]
        self.frame = None
        if self.run is not None and self.run.overloads:
            from mbvi.engine import fastcall

            addr = fastcall.address(self.run)
            if addr is not None:
                rs = self.rs
                self.frame = fastcall.frame(addr, (self.model.arrays, self.scheme, rs.arrays, self.steps, self.params,
                                                   out))  # fmt: skip

    def __call__(self, k0: int, kstop: int, nsteps: int, j0: int, project: bool = False) -> tuple[int, int, int]:
        """Steps ``k0`` … ``kstop − 1`` of a run of ``nsteps``, saving from slot ``j0``: (status, step, saved)."""
        steps, rs, info = self.steps, self.rs, self.info
        steps[RK.K0], steps[RK.KSTOP], steps[RK.NSTEPS], steps[RK.J0] = k0, kstop, nsteps, j0
        steps[RK.FRESH], steps[RK.PROJECT] = rs.fresh, project
        self.Wk[-1] = rs.work
        if self.frame is not None:
            if call_frame(self.frame):
                raise RuntimeError("the compiled loop raised (called through its address)")
        else:
            self.run(self.model.arrays, self.scheme, rs.arrays, steps, self.params, self.out)
            if self.run.overloads:  # compiled now: the next calls go through its address
                self.set_out(self.out)
        rs.fresh = False
        rs.work = float(self.Wk[-1])
        return int(info[RI.STATUS]), int(info[RI.STEP]), int(info[RI.SAVED])


def call_frame(fr: np.ndarray) -> int:
    """:func:`mbvi.engine.fastcall.call` (imported when first needed)."""
    from mbvi.engine.fastcall import call

    return call(fr)


def advance(
    model, scheme: np.ndarray, rs: RunState, *, t0: float, h: float, k0: int, kstop: int, nsteps: int,
    save_every: int, tol: float, maxiter: int, length_scale: float, max_turn: float, out: tuple, j0: int,
    project: bool = False,
) -> Advance:  # fmt: skip
    """Steps ``k0`` … ``kstop − 1`` of a run of ``nsteps`` from ``rs`` (stepped in place), in one compiled call.

    Saved states go to ``out = (Q, V, Wk, info)`` from slot ``j0``: positions, velocities, the work of the
    non-conservative forces so far (J; the last entry of Wk is the running total), and ``info``
    (:data:`mbvi.engine.fields.RI`, counters added). With ``project`` the velocity is first projected onto the
    constraints (and saved at ``j0 − 1``). One call: :class:`Advancer` for many.
    """
    run = entry(model, scheme)
    steps = np.zeros(RK.count, dtype=np.int64)
    steps[RK.K0], steps[RK.KSTOP], steps[RK.NSTEPS], steps[RK.SAVE_EVERY] = k0, kstop, nsteps, save_every
    steps[RK.J0], steps[RK.MAXITER], steps[RK.FRESH], steps[RK.PROJECT] = j0, maxiter, rs.fresh, project
    Wk, info = out[2], out[3]
    Wk[-1] = rs.work
    run(model.arrays, scheme, rs.arrays, steps, _params(t0, h, tol, length_scale, max_turn), out)
    rs.fresh = False
    rs.work = float(Wk[-1])
    return Advance(int(info[RI.STATUS]), int(info[RI.STEP]), int(info[RI.SAVED]))


def threads() -> int:
    """Threads a batch runs on: numba's (``numba.set_num_threads``, ``NUMBA_NUM_THREADS``; by default one per core)."""
    import numba

    return max(1, int(numba.get_num_threads()))


def _chunk(B: int) -> int:
    """Members per lockstep chunk: up to :data:`mbvi.engine.lockstep.CHUNK`, at least two chunks per thread."""
    from mbvi.engine.lockstep import CHUNK

    return min(CHUNK, max(1, -(-B // (2 * threads()))))


def run_batch(
    model, scheme: np.ndarray, Q0: np.ndarray, V0: np.ndarray, *, t0: float, h: float, nsteps: int,
    save_every: int, tol: float, maxiter: int, length_scale: float, max_turn: float, chunk: int | None = None,
    project: bool = True, ends: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """Every member of (Q0, V0) through the same compiled run, in parallel.

    ``chunk``: members stepped in lockstep (:mod:`mbvi.engine.lockstep`); by default up to
    :data:`mbvi.engine.lockstep.CHUNK`, at least two chunks per thread; 0: member by member.
    It changes the speed, not the result. ``ends``: (Q, V (B, nq), W (B,)) to receive the state and work where
    each member that left the lockstep stopped (a failed member's failing step's start).

    Returns
    -------
    t : ndarray, (nsave,)
    Q, V : ndarray, (B, nsave, nq)
    work : ndarray, (B, nsave)
    info : ndarray of int, (B, RI.count)
        Per member: status, step reached, states saved, and the counters (:data:`mbvi.engine.fields.RI`).
    """
    from mbvi.engine import lockstep

    B, nq = len(Q0), int(model.I[M.NQ])
    ns = nsave(nsteps, save_every)
    Q0, V0 = np.ascontiguousarray(Q0, float), np.ascontiguousarray(V0, float)
    Q, V = saved_states((B, ns, nq), zero=True), saved_states((B, ns, nq), zero=True)
    Q[:, 0], V[:, 0] = Q0, V0
    Wk = np.zeros((B, ns + 1))
    info = np.zeros((B, RI.count), dtype=np.int64)
    chunk = _chunk(B) if chunk is None else int(chunk)
    together = chunk >= 1 and lockstep.eligible(int(model.IL[LT.NB]), scheme)
    size = chunk if together else 1
    units = -(-B // size)
    steps = np.zeros(RK.count, dtype=np.int64)
    steps[RK.NSTEPS], steps[RK.SAVE_EVERY], steps[RK.MAXITER] = nsteps, save_every, maxiter
    steps[RK.PROJECT] = project
    params = _params(t0, h, tol, length_scale, max_turn)
    options = dict(t0=t0, h=h, nsteps=nsteps, save_every=save_every, tol=tol, maxiter=maxiter,
                   length_scale=length_scale, max_turn=max_turn)  # fmt: skip
    rows = SC.rows_needed(scheme)
    vf = 1 if model.I[M.HAS_VF] else None  # the lockstep entry without the fixed point on v½ when no force needs it

    def serial(b: int, k0: int, j0: int, q, v, lam, work: float, project: bool) -> None:
        """Member b on the serial loop, from step k0 (save slot j0) and state (q, v) with warm starts ``lam``."""
        rs = RunState(model, scheme, q, v, work, rows=rows)
        rs.lam[...] = lam
        advance(model, scheme, rs, k0=k0, kstop=nsteps, out=(Q[b], V[b], Wk[b], info[b]), j0=j0, project=project,
                **options)  # fmt: skip
        if ends is not None:
            ends[0][b], ends[1][b], ends[2][b] = rs.q, rs.v, Wk[b, -1]

    def unit(u: int) -> None:
        b0 = u * size
        m = min(size, B - b0)
        if not together:
            serial(b0, 0, 1, Q0[b0], V0[b0], 0.0, 0.0, project)
            return
        HK, HJ = np.zeros(m, dtype=np.int64), np.zeros(m, dtype=np.int64)
        HQ, HV, HW, HLAM = np.zeros((m, nq)), np.zeros((m, nq)), np.zeros(m), np.zeros((m, rows, int(model.I[M.N])))
        lockstep.run_chunk(model.I, model.F, scheme, steps, params, b0, m, Q, V, Wk, HK, HJ, HQ, HV, HLAM, HW, vf)
        for c in range(m):
            b = b0 + c
            if HK[c] < 0:  # finished in lockstep
                info[b, RI.STATUS], info[b, RI.STEP], info[b, RI.SAVED] = ST.DONE, nsteps, HJ[c]
            elif HJ[c] == 0:  # not in lockstep (its projection failed there): the whole run, projection first
                serial(b, 0, 1, Q0[b], V0[b], 0.0, 0.0, project)
            else:  # the rest of its run, from the start of the step it left the common path at
                serial(b, int(HK[c]), int(HJ[c]), HQ[c], HV[c], HLAM[c], float(HW[c]), False)

    # the compiled loops release the GIL: threads take the units (a few per thread, for balance)
    nthreads = min(threads(), units)
    if nthreads <= 1:
        for u in range(units):
            unit(u)
    else:
        with ThreadPoolExecutor(nthreads) as pool:
            for f in [pool.submit(unit, u) for u in range(units)]:
                f.result()
    return t0 + saved_steps(ns, nsteps, save_every) * h, Q, V, Wk[:, :ns], info
