"""Exceptions and warnings raised by mbvi."""

from __future__ import annotations

from typing import Any

__all__ = ["ConstraintWarning", "LoadError", "RedundantConstraintWarning", "SolverError", "member_failure"]


class SolverError(RuntimeError):
    """A nonlinear solve inside a time step (or an equilibrium search) failed.

    Attributes
    ----------
    time : float
        Simulation time at the start of the failing step, s.
    step : int
        Index of the failing step (0 is the first step).
    trajectory : mbvi.Trajectory or None
        Everything computed up to (not including) the failing step.
    culprit : str or None
        The body or joint the solver blames, when it can tell.
    suggested_dt : float or None
        A step size that should work, when it can tell, s.
    partial : mbvi.engine.runner.RunResult or None
        What the run had saved before the failing step (the integrator's raw arrays;
        :func:`mbvi.simulate` turns them into ``trajectory``).
    verified_dt : bool or None
        Whether a run at ``suggested_dt`` confirmed it (None: not said; False: the solver's estimate).
    ahead : str or None
        What the solver found on the motion's path that no step size cures (a mass matrix that vanishes there);
        None when it found nothing. :func:`mbvi.simulate` says it in the message when no run at a smaller step
        completes either.
    """

    def __init__(
        self,
        message: str,
        *,
        time: float | None = None,
        step: int | None = None,
        culprit: str | None = None,
        suggested_dt: float | None = None,
        trajectory: Any = None,
    ) -> None:
        self.reason = message
        self.time = time
        self.step = step
        self.culprit = culprit
        self.suggested_dt = suggested_dt
        self.trajectory = trajectory
        self.partial: Any = None
        self.verified_dt: bool | None = None
        self.ahead: str | None = None
        super().__init__(self._compose())

    def _compose(self) -> str:
        parts = []
        if self.time is not None and self.step is not None:
            parts.append(f"at t = {self.time:.6g} s (step {self.step})")
        parts.append(self.reason)
        if self.culprit and self.culprit not in self.reason:  # (a load's message names it already)
            parts.append(f"culprit: {self.culprit}")
        if self.suggested_dt is not None:
            parts.append(f"try dt <= {self.suggested_dt:.3g}")
        return ": ".join(parts[:2]) + ("; " + "; ".join(parts[2:]) if len(parts) > 2 else "")

    def unverified(self, why: str = "") -> None:
        """Say, once, that ``suggested_dt`` is the solver's estimate: no run at that dt confirmed it (``why``: what
        would). Nothing without a suggestion, or when it was already said whether one did."""
        if self.suggested_dt is None or self.verified_dt is not None:
            return
        self.verified_dt = False
        self.args = (self._compose() + (f" (not verified: {why})" if why else " (not verified)"),)

    def located(self, time: float, step: int) -> SolverError:
        """Return a copy that records where in time the failure happened (of the same class: a
        :class:`LoadError` stays one)."""
        copy = type(self)(
            self.reason,
            time=time,
            step=step,
            culprit=self.culprit,
            suggested_dt=self.suggested_dt,
            trajectory=self.trajectory,
        )
        copy.ahead = self.ahead
        return copy


class LoadError(SolverError, ValueError):
    """A load or force law the run calls raised, or returned what is not a force (NaN, the wrong shape).

    Both a :class:`SolverError` (the run stops there: ``time``, ``step`` and the partial ``trajectory``) and a
    ``ValueError`` (the element is at fault: its message names it, with its own message).
    """


class ConstraintWarning(UserWarning):
    """Initial velocities were corrected onto the constraints by more than the tolerance."""


class RedundantConstraintWarning(UserWarning):
    """Some constraint equations are linearly dependent and were dropped from the solves."""


def member_failure(cause: SolverError, failed: list[int], count: int, trajectories: list) -> SolverError:
    """The error of a batch of ``count`` members of which ``failed`` (sorted) stopped, the first by ``cause``.

    Its message names the member (and how many more failed), ``member`` is its index, ``members`` every failed
    one, and ``trajectory`` the list of every member's trajectory; a :class:`LoadError` when the cause is one.
    """
    b = failed[0]
    kind = type(cause) if type(cause) in (SolverError, LoadError) else SolverError
    err = kind(  # a SolverError; a LoadError (also a ValueError) when a load or law raised
        f"member {b} of {count}" + (f" (and {len(failed) - 1} more)" if len(failed) > 1 else "") + f": {cause.reason}",
        time=cause.time, step=cause.step, culprit=cause.culprit, suggested_dt=cause.suggested_dt,
        trajectory=trajectories,
    )  # fmt: skip
    err.member = b
    err.members = list(failed)
    err.ahead = cause.ahead  # (what lies on the member's path that no step cures: it was dropped here)
    if cause.verified_dt is not None:
        err.verified_dt = cause.verified_dt
    # a batch does not re-run a member to verify a step it suggests (simulate of that member does, when its
    # integrator runs compiled: a NumPy-path re-run may take long, and simulate leaves that hint unverified too)
    err.unverified("a batch does not re-run its members; mbvi.simulate of that member verifies a step size by "
                   "re-running when its integrator runs compiled")
    return err
