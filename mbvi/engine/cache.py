"""Keep numba's on-disk cache of the engine consistent with its sources.

numba invalidates a cached function when *its own* file changes, not when a
function it calls, or a slot constant it reads, changes in another file. The
engine's compiled code spans several files, so a stale cache could run old
code against a new model layout. Before the engine is first imported, this
hashes every engine source file and drops the engine's cache files when the
hash differs from the one they were built with.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

__all__ = ["ensure_fresh"]

HERE = Path(__file__).resolve().parent
SOURCES = (
    "fields.py", "scheme.py", "extrapolation.py", "kernels.py", "loop.py", "lie.py", "rotation.py", "lieloop.py",
    "lockstep.py",
)  # fmt: skip
_done = False


def ensure_fresh() -> None:
    """Delete stale engine cache files (once per process; silent when the cache is not writable)."""
    global _done
    if _done:
        return
    _done = True
    digest = hashlib.sha256()
    for name in SOURCES:
        digest.update((HERE / name).read_bytes())
    stamp = digest.hexdigest()
    cache = HERE / "__pycache__"
    marker = cache / "engine-sources.sha256"
    try:
        if marker.is_file() and marker.read_text().strip() == stamp:
            return
        for stem in (s[:-3] for s in SOURCES):
            for f in list(cache.glob(f"{stem}.*.nbi")) + list(cache.glob(f"{stem}.*.nbc")):
                f.unlink(missing_ok=True)
        cache.mkdir(exist_ok=True)
        marker.write_text(stamp)
    except OSError:
        pass
