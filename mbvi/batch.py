"""Many copies of one system stepped together: a batched RATTLE.

For small mechanisms the cost of a step is Python and NumPy call overhead, not
arithmetic: a double pendulum spends tens of microseconds per step on a few
dozen array calls of length 6. Stepping B copies (different initial states —
ensembles, parameter studies of initial conditions, Monte Carlo) with every
array given a leading batch axis spends those same calls on B systems at
once, so the cost per system-step falls roughly as 1/B until arithmetic
dominates. The scheme is exactly :class:`mbvi.integrators.rattle.Verlet`
(same quasi-Newton SHAKE, same tolerance), so each copy reproduces a serial
run to round-off.

Constraint matrices G M⁻¹ Gᵀ are inverted densely per copy, so this suits
systems with up to a few hundred constraint rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mbvi.assembly import assemble
from mbvi.errors import SolverError
from mbvi.scene import Scene
from mbvi.state import State
from mbvi.system import System
from mbvi.trajectory import Trajectory

__all__ = ["BatchVerlet", "simulate_batch"]

BATCH_MAX_ROWS = 400


class BatchVerlet:
    """RATTLE for a batch of states of one system (arrays of shape (B, nq)).

    Parameters
    ----------
    system : mbvi.System
    dt : float
        Step size, s.
    tol : float, default: 1e-12
        Relative constraint tolerance, as for ``verlet``.
    maxiter : int, default: 60
        SHAKE iterations per step.
    """

    name = "verlet"
    order = 2

    def __init__(self, system: System, dt: float, tol: float = 1e-12, maxiter: int = 60) -> None:
        if not dt > 0:
            raise ValueError(f"BatchVerlet: dt must be positive, got {dt!r}")
        n = len(system.active)
        if n > BATCH_MAX_ROWS:
            raise ValueError(
                f"BatchVerlet: {n} constraint rows is too many for dense batched solves "
                f"(max {BATCH_MAX_ROWS}); use mbvi.simulate"
            )
        self.system, self.dt, self.tol, self.maxiter = system, float(dt), tol, maxiter
        rows = system.rows
        act = system.active
        self.n = n
        nq = system.nq
        # affine maps restricted to active rows, as sparse matrices acting on (nq, B)
        sel = (3 * act[:, None] + np.arange(3)).ravel()
        self.AU = rows._AU[sel].tocsr()
        self.AW = rows._AW[sel].tocsr()
        self.cu = rows._cu[sel]
        self.cw = rows._cw[sel]
        self.s, self.k = rows.s[act], rows.k[act]
        self.scale = system.active_scale
        # G[r, :] = s_r Σ_j (W_rj AU[3r+j, :] + U_rj AW[3r+j, :]); dense copies for the einsums
        self._AUd = self.AU.toarray().reshape(n, 3, nq)
        self._AWd = self.AW.toarray().reshape(n, 3, nq)
        self.W = system.inv_mass

    # -- batched kernels ---------------------------------------------------------------------------
    def _affine(self, Q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        QT = Q.T
        U = (self.AU @ QT).T + self.cu
        W = (self.AW @ QT).T + self.cw
        return U, W

    def _g(self, Q: np.ndarray) -> np.ndarray:
        U, W = self._affine(Q)
        return self.s * (U * W).reshape(len(Q), self.n, 3).sum(-1) - self.k

    def _jacobian(self, Q: np.ndarray) -> np.ndarray:
        """Dense G for each copy, shape (B, n, nq)."""
        U, W = self._affine(Q)
        B = len(Q)
        AU, AW = self._AUd, self._AWd
        Wr = W.reshape(B, self.n, 3)
        Ur = U.reshape(B, self.n, 3)
        G = np.einsum("brj,rjq->brq", Wr, AU) + np.einsum("brj,rjq->brq", Ur, AW)
        return self.s[None, :, None] * G

    def _factor(self, Q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        G = self._jacobian(Q)
        A = np.einsum("brq,q,bsq->brs", G, self.W, G)
        return G, np.linalg.inv(A)

    def _gradient(self, Q: np.ndarray) -> np.ndarray:
        grad = np.zeros_like(Q)
        for law in self.system.potential_laws:
            grad += law.gradient_batch(Q)
        return grad

    def _force(self, Q: np.ndarray, V: np.ndarray, t: float) -> np.ndarray:
        F = np.zeros_like(Q)
        for law in self.system.force_laws:
            F += law.force_batch(Q, V, t)
        return F

    def _shake(self, Q0, Vfree, G0, Ainv0):
        h, Wm = self.dt, self.W
        Q = Q0 + h * Vfree
        corr = np.zeros_like(Q)
        for _ in range(self.maxiter):
            g = self._g(Q)
            r = np.abs(g / self.scale).max() if self.n else 0.0
            if r <= self.tol:
                return Q, Vfree - corr / h
            if not np.isfinite(r):
                break
            lam = np.einsum("brs,bs->br", Ainv0, g)
            dq = Wm * np.einsum("brq,br->bq", G0, lam)
            Q = Q - dq
            corr += dq
        raise SolverError("batched SHAKE did not converge", suggested_dt=self.dt / 4)

    def _project(self, G, Ainv, V):
        mu = np.einsum("brs,bs->br", Ainv, np.einsum("brq,bq->br", G, V))
        return V - self.W * np.einsum("brq,br->bq", G, mu)

    def step(self, Q: np.ndarray, V: np.ndarray, t: float, cache: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
        """One RATTLE step for every copy: (Q, V) of shape (B, nq) → (Q₁, V₁)."""
        sysm, h, Wm = self.system, self.dt, self.W
        if cache and cache.get("Q") is Q:
            G0, Ainv0, grad0 = cache["G"], cache["Ainv"], cache["grad"]
        else:
            G0, Ainv0 = self._factor(Q)
            grad0 = self._gradient(Q)
        if sysm.has_velocity_forces:
            Vh = V
            for _ in range(100):
                kick = 0.5 * h * Wm * (self._force(Q, Vh, t) - grad0)
                Q1, Vnew = self._shake(Q, V + kick, G0, Ainv0)
                # SHAKE returns v½ only to ~ tol·L/h (as in Verlet): do not ask for more
                floor = 10.0 * self.tol * max(1.0, sysm.length_scale) / h if self.n else 0.0
                done = np.max(np.abs(Vnew - Vh)) <= 1e-13 * max(1.0, float(np.max(np.abs(Vnew)))) + floor
                Vh = Vnew
                if done:
                    break
            else:
                raise SolverError("batched implicit drift did not converge", suggested_dt=self.dt / 4)
        else:
            f0 = -grad0 + (self._force(Q, V, t) if sysm.has_forces else 0.0)
            Q1, Vh = self._shake(Q, V + 0.5 * h * Wm * f0, G0, Ainv0)
        grad1 = self._gradient(Q1)
        f1 = -grad1 + (self._force(Q1, Vh, t + h) if sysm.has_forces else 0.0)
        G1, Ainv1 = self._factor(Q1)
        V1 = self._project(G1, Ainv1, Vh + 0.5 * h * Wm * f1)
        if cache is not None:
            cache.update(Q=Q1, G=G1, Ainv=Ainv1, grad=grad1)
        return Q1, V1


def simulate_batch(
    scene: Scene, t_end: float, dt: float, initial_states: Any, *, save_every: int = 1, tol: float = 1e-12
) -> list[Trajectory]:
    """Simulate many initial states of one scene together with batched RATTLE (``verlet``).

    Parameters
    ----------
    scene : mbvi.Scene
    t_end, dt : float
        End time and step size, s.
    initial_states : sequence of mbvi.State, or a tuple (Q, V) of arrays of shape (B, nq)
        One state per copy (e.g. perturbations of ``assemble(scene).initial_state()``);
        positions must satisfy the constraints, velocities are projected onto them.
    save_every : int, default: 1
        Keep every n-th state (the last one is always kept).
    tol : float, default: 1e-12
        Relative constraint tolerance.

    Returns
    -------
    list of Trajectory
        One per copy, identical (to round-off) to ``mbvi.simulate(..., integrator="verlet")``
        from the same state.

    Examples
    --------
    >>> import numpy as np, mbvi
    >>> scene = mbvi.Scene(gravity=(0, 0, -9.81))
    >>> _ = scene.add(mbvi.Particle("bob", mass=1.0, position=(1, 0, 0)))
    >>> _ = scene.add(mbvi.Rod("world", "bob"))
    >>> s0 = mbvi.assemble(scene).initial_state()
    >>> states = [mbvi.State(s0.q, s0.v + (0, w, 0)) for w in np.linspace(0, 1, 8)]
    >>> trajs = mbvi.simulate_batch(scene, t_end=1.0, dt=1e-2, initial_states=states)
    >>> len(trajs), trajs[0].q.shape
    (8, (101, 3))
    """
    system = assemble(scene)
    if isinstance(initial_states, tuple) and len(initial_states) == 2 and np.ndim(initial_states[0]) == 2:
        Q, V = (np.array(a, dtype=float) for a in initial_states)
    else:
        states = list(initial_states)
        if not states or not all(isinstance(s, State) for s in states):
            raise ValueError("simulate_batch: initial_states must be a non-empty sequence of mbvi.State or (Q, V)")
        Q = np.array([s.q for s in states], dtype=float)
        V = np.array([s.v for s in states], dtype=float)
    if Q.ndim != 2 or Q.shape != V.shape or Q.shape[1] != system.nq:
        raise ValueError(f"simulate_batch: states must have shape (B, {system.nq})")
    if not (np.all(np.isfinite(Q)) and np.all(np.isfinite(V))):
        raise ValueError("simulate_batch: initial states must be finite")
    stepper = BatchVerlet(system, dt, tol=tol)
    if stepper.n:
        bad = np.abs(stepper._g(Q) / stepper.scale).max(axis=1)
        worst = int(np.argmax(bad))
        if bad[worst] > 1e-8:
            raise ValueError(
                f"simulate_batch: initial state {worst} violates the constraints (residual {bad[worst]:.3g})"
            )
        G, Ainv = stepper._factor(Q)
        V = stepper._project(G, Ainv, V)
    if not (dt > 0 and t_end >= 0):
        raise ValueError(f"simulate_batch: need dt > 0 and t_end >= 0, got dt={dt!r}, t_end={t_end!r}")
    ratio = t_end / dt
    nsteps = round(ratio) if abs(ratio - round(ratio)) < 1e-9 * max(1.0, ratio) else int(np.ceil(ratio))
    keep = [k for k in range(nsteps + 1) if k % save_every == 0 or k == nsteps]
    B = len(Q)
    Qs = np.empty((len(keep), B, system.nq))
    Vs = np.empty_like(Qs)
    Qs[0], Vs[0] = Q, V
    cache: dict = {}
    j = 1
    for k in range(nsteps):
        try:
            Q, V = stepper.step(Q, V, k * dt, cache)
        except SolverError as exc:
            raise SolverError(exc.reason, time=k * dt, step=k, suggested_dt=exc.suggested_dt) from exc
        if j < len(keep) and keep[j] == k + 1:
            Qs[j], Vs[j] = Q, V
            j += 1
    t = np.array(keep, dtype=float) * dt
    info = {"integrator": "verlet", "dt": float(dt), "order": 2, "batch": B}
    return [Trajectory.from_states(system, t, Qs[:, b], Vs[:, b], scene=scene, info=info) for b in range(B)]
