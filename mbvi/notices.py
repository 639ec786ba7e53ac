"""What a run warned about, kept for a caller that runs it out of sight (a member of :func:`mbvi.sweep` or of
:func:`mbvi.simulate_batch`).

A warning from a worker process or thread reaches nobody (a worker's stderr, a cluster's logs), so a sweep
member whose step was too large passed as a fine result. The runs warn through :func:`warn`, which also keeps
the message for the run being watched in this thread (:func:`kept`): per thread, so members running side by
side (Dask's threads) keep their own, and with no change to the process's warning filters, which
``warnings.catch_warnings`` would make (it is not thread-safe). A caller that speaks for its members
(one warning naming them) keeps their messages quietly.
"""

from __future__ import annotations

import sys
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["kept", "warn"]

_local = threading.local()
#: the package's own files: a warning points at the first caller outside them (the user's line)
_PACKAGE = str(Path(__file__).resolve().parent)


def _outside_level() -> int:
    """The ``stacklevel`` of :func:`warnings.warn`, called in :func:`warn`, that names the first frame outside mbvi
    (2: the caller of :func:`warn` when there is none: a test calling mbvi's internals from a file of its own)."""
    frame, level = sys._getframe(2), 2
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    return level if frame is not None else 2


def warn(message: str, category: type[Warning], stacklevel: int | None = None) -> None:
    """``warnings.warn(message, category)``, the message also kept when this thread's run is watched (:func:`kept`).

    ``stacklevel`` counts from the caller of this function, as for ``warnings.warn``; None (the default) names the
    first caller outside mbvi, the line of the user's code that led to the warning, however deep it was given.
    """
    notes = getattr(_local, "notes", None)
    if notes is not None and message not in notes:
        notes.append(message)
    if getattr(_local, "quiet", False):
        return
    warnings.warn(message, category, stacklevel=_outside_level() if stacklevel is None else stacklevel + 1)


@contextmanager
def kept(quiet: bool = False) -> Iterator[list[str]]:
    """The messages :func:`warn` gives in this thread within the block, in order, each once.

    Parameters
    ----------
    quiet : bool, default: False
        Keep them without giving them (the caller gives one warning for all it watched); else they are given as
        usual too, and kept for the block around this one, if any (given only when that one gives them). A quiet
        block speaks for what it watched, or hides it (a run that verifies a suggested dt): the block around it
        does not see its messages.
    """
    before, was_quiet = getattr(_local, "notes", None), getattr(_local, "quiet", False)
    notes: list[str] = []
    _local.notes, _local.quiet = notes, quiet or was_quiet
    try:
        yield notes
    finally:
        _local.notes, _local.quiet = before, was_quiet
        if before is not None and not quiet:
            before.extend(m for m in notes if m not in before)
