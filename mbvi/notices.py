"""What a run warned about, kept for a caller that runs it out of sight (a member of :func:`mbvi.sweep`).

A warning from a worker process or thread reaches nobody (a worker's stderr, a cluster's logs), so a sweep
member whose step was too large passed as a fine result. The runs warn through :func:`warn`, which also keeps
the message for the member running in this thread (:func:`kept`): per thread, so members running side by side
(Dask's threads) keep their own, and with no change to the process's warning filters, which
``warnings.catch_warnings`` would make (it is not thread-safe).
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["kept", "warn"]

_local = threading.local()


def warn(message: str, category: type[Warning], stacklevel: int = 1) -> None:
    """``warnings.warn(message, category)``, the message also kept when this thread's run is watched (:func:`kept`).

    ``stacklevel`` counts from the caller of this function, as for ``warnings.warn``.
    """
    notes = getattr(_local, "notes", None)
    if notes is not None and message not in notes:
        notes.append(message)
    warnings.warn(message, category, stacklevel=stacklevel + 1)


@contextmanager
def kept() -> Iterator[list[str]]:
    """The messages :func:`warn` gives in this thread within the block, in order, each once (the warnings are
    still given as usual)."""
    before = getattr(_local, "notes", None)
    _local.notes = notes = []
    try:
        yield notes
    finally:
        _local.notes = before
