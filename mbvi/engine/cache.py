"""Keep numba's on-disk cache of the engine consistent with its sources.

numba invalidates a cached function when *its own* file changes, not when a
function it calls, or a slot constant it reads, changes in another file. The
engine's compiled code spans several files, so a stale cache could run old
code against a new model layout. Before the engine is first imported, this
hashes every engine source file and drops the engine's cache files when the
hash differs from the one they were built with. And while numba compiles (the
first run on a machine), it says so, once (:func:`announce_compiling`).
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import tempfile
import threading
from pathlib import Path

__all__ = ["announce_compiling", "ensure_fresh", "serialize_cache_saves", "stamp"]

HERE = Path(__file__).resolve().parent
SOURCES = (
    "fields.py", "scheme.py", "dense.py", "contract.py", "extrapolation.py", "kernels.py", "loop.py", "lie.py",
    "rotation.py", "lieloop.py", "lockstep.py", "api.py", "steps.py", "lagrange.py", "spin.py", "fastcall.py",
    "stateview.py",
)  # fmt: skip
_done = False
_stamp: str | None = None


def stamp() -> str:
    """A hash of the engine's compiled sources: numba's cache of the engine, and of every kernel wrapper
    (:mod:`mbvi.engine.callbacks`), is valid for these sources only."""
    global _stamp
    if _stamp is None:
        digest = hashlib.sha256()
        for name in SOURCES:
            digest.update((HERE / name).read_bytes())
        _stamp = digest.hexdigest()
    return _stamp


def ensure_fresh() -> None:
    """Delete stale engine cache files (once per process; silent when the cache is not writable), and
    serialize numba's cache saves across processes (:func:`serialize_cache_saves`)."""
    global _done
    if _done:
        return
    _done = True
    serialize_cache_saves()
    current = stamp()
    cache = HERE / "__pycache__"
    marker = cache / "engine-sources.sha256"
    try:
        if marker.is_file() and marker.read_text().strip() == current:
            return
        for stem in (s[:-3] for s in SOURCES):
            for f in list(cache.glob(f"{stem}.*.nbi")) + list(cache.glob(f"{stem}.*.nbc")):
                f.unlink(missing_ok=True)
        cache.mkdir(exist_ok=True)
        marker.write_text(current)
    except OSError:
        pass


#: the lock file numba's cache saves take, in the system's temporary directory (one for the machine)
SAVE_LOCK = Path(tempfile.gettempdir()) / "mbvi-numba-cache-save.lock"


def serialize_cache_saves() -> None:
    """Make numba's cache saves exclusive across processes (POSIX; elsewhere numba is left as it is).

    numba saves a compiled function by reading its cache index, adding the new signature under the first
    free data-file number and writing both back, without a lock: two processes saving two signatures of
    one function at once (``mbvi compile``'s processes, pytest's workers, a sweep's process pool) can both
    pick ``….1.nbc``, and the index may then name for one signature the file holding the other's code,
    which numba would load and call with the wrong types. Each save here holds an exclusive ``flock`` on
    :data:`SAVE_LOCK` (a few milliseconds; loads are not locked: numba replaces the index atomically).
    """
    try:
        import fcntl

        from numba.core import caching
    except ImportError:
        return
    cls = caching.IndexDataCacheFile
    if getattr(cls.save, "_mbvi_locked", False):
        return
    unlocked = cls.save

    def save(self, key, data):
        try:
            fd = os.open(SAVE_LOCK, os.O_RDONLY | os.O_CREAT, 0o666)
        except OSError:
            return unlocked(self, key, data)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
            except OSError:  # a file system without locks: save as numba does
                pass
            return unlocked(self, key, data)
        finally:
            os.close(fd)  # releases the lock

    save._mbvi_locked = True  # type: ignore[attr-defined]
    cls.save = save


# ------------------------------------------------------------------------------------------- first use
#: seconds a compilation lasts before the user is told (a load from the cache is quicker)
TELL_AFTER = 1.5
#: what the user was told is compiling ("engine", or a user function's qualified name): each said once
_told_of: set[str] = set()
_listening = False


def announce_compiling() -> None:
    """Tell the user, once per process, on stderr, when numba compiles the engine (the first run on a machine).

    A compilation that lasts longer than :data:`TELL_AFTER` seconds (numba's ``numba:compile`` event: loads from
    the on-disk cache finish sooner) prints one line saying so and that it is cached afterwards. Set
    ``MBVI_QUIET=1`` to silence it.
    """
    global _listening
    if _listening or os.environ.get("MBVI_QUIET", "").strip() not in ("", "0"):
        return
    _listening = True
    from numba.core import event

    class _Compiling(event.Listener):
        def __init__(self) -> None:
            self.depth = 0
            self.timer: threading.Timer | None = None

        def on_start(self, ev) -> None:
            self.depth += 1
            if self.depth == 1:
                what = _what(ev)
                if what not in _told_of:
                    self.timer = threading.Timer(TELL_AFTER, _tell, (what,))
                    self.timer.daemon = True
                    self.timer.start()

        def on_end(self, ev) -> None:
            self.depth -= 1
            if self.depth == 0 and self.timer is not None:
                self.timer.cancel()
                self.timer = None

    event.register("numba:compile", _Compiling())


#: what a compiled copy of a user's function is called in messages, by its qualified name (:func:`label`)
_labels: dict[str, str] = {}
#: the tag :func:`mbvi.engine.callbacks.named_apart` appends to a copy's name
_TAG = re.compile(r"__k?[0-9a-f]{16,}")


def label(qualname: str, text: str) -> None:
    """Call the compiled function of qualified name ``qualname`` ``text`` when it compiles (e.g. a load's wrapper,
    an engine-module function that runs the user's callable: not the engine)."""
    _labels[qualname] = text


def _what(ev) -> str:
    """ "engine" for the engine's own functions, else what the user's function compiling is called."""
    try:
        fn = ev.data["dispatcher"].py_func
        module, name = getattr(fn, "__module__", "") or "", getattr(fn, "__qualname__", "") or repr(fn)
    except (KeyError, AttributeError):
        return "engine"
    if name in _labels:
        return _labels[name]
    if module.startswith("mbvi.") or module == "mbvi":
        return "engine"
    return f"{module}.{_TAG.sub('', name)}" if module else _TAG.sub("", name)


def _tell(what: str = "engine") -> None:
    if what in _told_of:
        return
    _told_of.add(what)
    if what == "engine":
        text = (
            "mbvi: compiling the engine for this machine (20 s to a minute, once: it is cached on disk afterwards) ..."
        )
    else:  # a user's function (a load, a law's kernel): not the engine, which is compiled once
        text = f"mbvi: compiling {what} for the compiled loop (seconds; the engine itself is not recompiled) ..."
    print(text, file=sys.stderr, flush=True)
