"""Ctrl-C during a compiled run: asked for between the run's calls, answered with what was run so far.

A compiled run is one call into numba's code, and Python handles a signal only when that call returns: a run of
3e7 pendulum steps went on for 25 s after Ctrl-C, then discarded what it had run. And inside a load called back
from the compiled loop, a ``KeyboardInterrupt`` that landed before the callback's own ``try`` was printed and
swallowed by ctypes, and the run completed as if nothing had happened (3 runs in 16). So a run longer than a
chunk (:data:`mbvi.integrators.compiled.CHUNK` steps) is called in chunks of about :data:`CHECK_EVERY` seconds, and
while it runs, SIGINT only sets a flag (:func:`deferred`), read between the chunks: the run then raises
``KeyboardInterrupt`` at a clean step, carrying the states saved so far.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["CHECK_EVERY", "FIRST_CHUNK", "MIN_CHUNK", "Interrupt", "Pace", "deferred", "interrupted", "next_chunk"]

#: a long compiled run is called in chunks of about this long, s: Ctrl-C stops it within about that
CHECK_EVERY = 0.2
#: steps of a long run's first chunk (its time per step not known yet: a load called back as Python can take a
#: millisecond a step) and the fewest of any
FIRST_CHUNK = 256
MIN_CHUNK = 16


def next_chunk(steps: int, took: float) -> int:
    """Steps of the next chunk, after one of ``steps`` steps took ``took`` s: about :data:`CHECK_EVERY` s."""
    if steps <= 0 or not took > 0.0:
        return FIRST_CHUNK
    return max(MIN_CHUNK, min(2**40, int(steps * CHECK_EVERY / took)))


class Interrupt:
    """Whether Ctrl-C was pressed while :func:`deferred` was in force."""

    requested = False


class Pace:
    """Where each call of a compiled run's loop stops: every ``progress`` steps when a progress callback reads
    them, in chunks of about :data:`CHECK_EVERY` s when an ``interrupt`` is read between calls, else at the end
    (the scenes' :class:`mbvi.integrators.compiled.Drive` and the Lagrangian systems' ``Run`` pace alike)."""

    def __init__(self, interrupt: Interrupt | None, progress: int) -> None:
        self.interrupt, self.progress = interrupt, progress
        self.size, self._began = FIRST_CHUNK, 0.0

    def stop(self, k: int, kstop: int, callback: object) -> int:
        """The step a call from step ``k`` stops at (its clock starts)."""
        self._began = time.perf_counter()
        if callback is not None:
            return min(kstop, k + self.progress)
        return kstop if self.interrupt is None else min(kstop, k + self.size)

    def took(self, steps: int) -> None:
        """The call took ``steps`` steps: the next chunk is sized by its time."""
        if self.interrupt is not None and steps > 0:
            self.size = next_chunk(steps, time.perf_counter() - self._began)

    def check(self, t: float, k: int, partial: Callable[[], object]) -> None:
        """Raise :func:`interrupted` at time ``t`` (s), step ``k`` when Ctrl-C was pressed (``partial()``: the
        states saved so far)."""
        if self.interrupt is not None and self.interrupt.requested:
            raise interrupted(t, k, partial())


@contextmanager
def deferred() -> Iterator[Interrupt]:
    """While the block runs, SIGINT sets ``requested`` on the :class:`Interrupt` yielded instead of raising where it
    lands; a second Ctrl-C raises at once. Only in the main thread and under Python's own SIGINT handler (a
    handler of the user's, or one in a thread, is left alone: ``requested`` then stays False)."""
    flag = Interrupt()
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):  # fmt: skip
        yield flag
        return

    def asked(signum: int, frame: object) -> None:
        flag.requested = True
        signal.signal(signal.SIGINT, signal.default_int_handler)  # a second Ctrl-C: at once

    signal.signal(signal.SIGINT, asked)
    try:
        yield flag
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def interrupted(t: float, k: int, partial: object) -> KeyboardInterrupt:
    """The ``KeyboardInterrupt`` of a run stopped by Ctrl-C at time ``t`` (s), step ``k``, with ``partial`` (the
    states saved so far) for the caller to make a trajectory of (``exc.trajectory``)."""
    exc = KeyboardInterrupt(f"interrupted at t = {t:.6g} s (step {k}): the states run so far are in .trajectory")
    exc.partial = partial
    exc.trajectory = None
    return exc
