"""Write rendered frames to a GIF (Pillow) or an MP4 (ffmpeg), rendering them in worker processes.

Frames are streamed to ffmpeg one by one; GIF frames are quantized to a
palette as they arrive (:func:`encode_frame`) and written by Pillow when the
writer closes.

:func:`render_parallel` draws the frames of an animation in worker processes
(fresh interpreters: VTK's OpenGL state does not survive ``fork``, and
``spawn`` would re-run an unguarded user script), each with its own
off-screen plotter, and hands them back in order, already
encoded (GIF frames quantized in the worker). Rendering is per-frame VTK
work (mostly rasterization, in software under headless EGL), so two workers
draw about twice as many frames per second as one process on two free cores.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
from numpy.typing import NDArray

from mbvi._validate import is_number
from mbvi.render.frames import check_fps

__all__ = ["GIF_MAX_FPS", "VIDEO_SUFFIXES", "VideoWriter", "encode_frame", "gif_durations", "render_parallel"]

#: File suffixes :class:`VideoWriter` can write.
VIDEO_SUFFIXES = (".gif", ".mp4")
#: Highest frame rate a GIF plays at in browsers (delays of 2 cs; shorter ones are shown for 10 cs), 1/s.
GIF_MAX_FPS = 50.0


class VideoWriter:
    """Append RGB frames to a ``.gif`` or ``.mp4`` file.

    Parameters
    ----------
    path : str or Path
        Output file; the suffix picks the format.
    fps : float
        Frames per second.
    quality : float, default: 7
        MP4 quality, 1 (worst) … 10 (best), as imageio-ffmpeg takes it.

    Raises
    ------
    ValueError
        For a suffix other than ``.gif`` or ``.mp4``, an ``fps`` under :data:`MIN_FPS` (a GIF's frame delay is
        a 16-bit count of hundredths of a second; ffmpeg rounded a rate of 1e-7 to 0) or a ``quality`` out of
        its range.

    Warns
    -----
    UserWarning
        For a GIF above :data:`GIF_MAX_FPS` frames per second, which viewers
        play slower than asked.

    Notes
    -----
    GIF frame delays are whole centiseconds: they follow :func:`gif_durations`,
    so that the GIF keeps to ``fps`` on average and never drifts.

    Examples
    --------
    >>> with VideoWriter("out.gif", fps=10) as w:  # doctest: +SKIP
    ...     w.append(frame)
    """

    def __init__(self, path: str | Path, fps: float, *, quality: float = 7.0) -> None:
        self.path = Path(path)
        self.suffix = self.path.suffix.lower()
        if self.suffix not in VIDEO_SUFFIXES:
            raise ValueError(f"cannot write video {str(self.path)!r}: use a .gif or .mp4 file name")
        check_fps(fps)
        if not (is_number(quality) and 1.0 <= float(quality) <= 10.0):
            raise ValueError(f"quality must be a number in 1 … 10 (MP4 quality, 10 best), got {quality!r}")
        self.fps = float(fps)
        self.quality = float(quality)
        if self.suffix == ".gif" and self.fps > GIF_MAX_FPS:
            warnings.warn(
                f"a GIF at fps={self.fps:g} plays slower than that: GIF delays are whole hundredths of a second "
                f"and browsers show frames of less than 0.02 s for 0.1 s; use fps <= {GIF_MAX_FPS:g} or an .mp4",
                UserWarning,
                stacklevel=3,
            )
        self.frames = 0
        self._writer: Any = None
        self._size: tuple[int, int] | None = None

    def append(self, image: NDArray[np.uint8]) -> None:
        """Add one frame, shape (height, width, 3) or (height, width, 4), uint8."""
        self.append_encoded(encode_frame(image, self.suffix))

    def append_encoded(self, frame: Any) -> None:
        """Add one frame already passed through :func:`encode_frame` for this writer's suffix."""
        if self.suffix == ".gif":
            w, h = frame.size
        else:
            h, w = frame.shape[:2]
        if self._writer is None:
            self._size = (w, h)
            self._open()
        elif (w, h) != self._size:
            raise ValueError(f"frame size {(w, h)} differs from the first frame's {self._size}")
        if self.suffix == ".gif":
            self._writer.append(frame)
        else:
            self._writer.send(frame)
        self.frames += 1

    def _open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.suffix == ".gif":
            self._writer = []  # palette images, saved by Pillow on close
        else:
            import imageio_ffmpeg

            assert self._size is not None
            self._writer = imageio_ffmpeg.write_frames(
                str(self.path),
                self._size,
                fps=self.fps,
                codec="libx264",
                pix_fmt_in="rgb24",
                pix_fmt_out="yuv420p",
                quality=self.quality,
                macro_block_size=1,
                ffmpeg_log_level="error",
            )
            self._writer.send(None)

    def close(self) -> None:
        """Finish the file."""
        if self._writer is None:
            return
        writer, self._writer = self._writer, None
        if self.suffix == ".gif":
            first, *rest = writer
            durations = gif_durations(len(writer), self.fps)
            first.save(self.path, save_all=True, append_images=rest, duration=durations, loop=0)
        else:
            writer.close()

    def __enter__(self) -> VideoWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def gif_durations(frames: int, fps: float) -> list[int]:
    """Display time of each GIF frame, ms, so that frame ``k`` appears at ``k / fps`` s.

    GIF stores delays in whole centiseconds and Pillow truncates the
    milliseconds it is given to them (``1000 / 30`` ms becomes 3 cs: a 30 fps
    GIF played at 33 fps, 10 % fast). Here every frame starts at its exact
    time rounded to the centisecond, so delays alternate (3, 3, 4 cs at
    30 fps) and the error never adds up.

    Parameters
    ----------
    frames : int
        Number of frames.
    fps : float
        Frames per second, 1/s.

    Returns
    -------
    list of int
        ``frames`` durations, ms, each a multiple of 10.

    Examples
    --------
    >>> gif_durations(4, 30.0)
    [30, 40, 30, 30]
    """
    starts = np.floor(np.arange(frames + 1) * (100.0 / fps) + 0.5).astype(np.int64)  # cs, half up
    return [10 * int(d) for d in np.diff(starts)]


def _even(image: NDArray[np.uint8]) -> NDArray[np.uint8]:
    """Pad by edge replication to even width and height (yuv420p needs both)."""
    h, w = image.shape[:2]
    if h % 2 == 0 and w % 2 == 0:
        return image
    return np.pad(image, ((0, h % 2), (0, w % 2), (0, 0)), mode="edge")


def encode_frame(image: NDArray[np.uint8], suffix: str) -> Any:
    """A rendered RGB(A) frame, shape (height, width, 3 or 4), made ready for a ``.gif`` or ``.mp4`` writer.

    GIF: a Pillow palette image of up to 256 colours (fast-octree
    quantization: 4 ms for 640×480 where Pillow's default median cut takes
    30 ms, with no visible difference on rendered scenes); MP4: contiguous
    RGB padded to even sides.
    """
    image = np.ascontiguousarray(np.asarray(image, dtype=np.uint8)[..., :3])
    if suffix == ".mp4":
        return _even(image)
    from PIL import Image

    return Image.fromarray(image).quantize(256, method=Image.Quantize.FASTOCTREE)


# -- rendering in worker processes --------------------------------------------------------------------
def _chunks(n: int, workers: int) -> list[tuple[int, int]]:
    size = max(4, min(32, math.ceil(n / (4 * workers))))
    return [(a, min(a + size, n)) for a in range(0, n, size)]


def render_parallel(
    data: Any,
    trails: Any,
    opts: dict[str, Any],
    window_size: tuple[int, int],
    anti_aliasing: str | None,
    suffix: str,
    workers: int,
) -> Iterator[Any]:
    """Render every frame of ``data`` in ``workers`` processes; yield them in order, encoded for ``suffix``.

    Each worker is a fresh interpreter (``python -m mbvi.render._worker``, so
    the user's script is never re-imported, guarded by ``if __name__ ==
    "__main__"`` or not, and VTK never crosses a ``fork``). It receives the job
    once (pickled on its stdin), draws every ``workers``-th chunk of frames with
    its own off-screen plotter and streams the encoded chunks back on its
    stdout; a reader thread per worker keeps the pipes flowing.

    Parameters
    ----------
    data : mbvi.render.FrameData
        The frames.
    trails : mbvi.render.view.TrailSpec or None
    opts : dict
        :class:`mbvi.render.SceneView` options.
    window_size : (int, int)
        Pixels.
    anti_aliasing : str or None
    suffix : {".gif", ".mp4"}
    workers : int
        Worker processes (each pays PyVista's import, about a second).

    Raises
    ------
    RuntimeError
        When a worker fails (with its error output).
    """
    import pickle
    import queue
    import subprocess
    import sys
    import tempfile
    import threading

    chunks = _chunks(data.n_frames, workers)
    workers = max(1, min(workers, len(chunks)))
    procs, queues, logs = [], [], []
    try:
        for k in range(workers):
            log = tempfile.TemporaryFile()
            proc = subprocess.Popen(
                [sys.executable, "-m", "mbvi.render._worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log
            )
            job = {
                "data": data,
                "trails": trails,
                "opts": opts,
                "window_size": tuple(window_size),
                "anti_aliasing": anti_aliasing,
                "suffix": suffix,
                "chunks": chunks[k::workers],
            }
            assert proc.stdin is not None
            pickle.dump(job, proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)
            proc.stdin.close()
            q: queue.Queue = queue.Queue()

            def read(stream: Any = proc.stdout, q: queue.Queue = q, count: int = len(chunks[k::workers])) -> None:
                try:
                    for _ in range(count):
                        q.put(pickle.load(stream))
                except Exception as exc:  # EOF: the worker died; reported below with its log
                    q.put(exc)

            threading.Thread(target=read, daemon=True).start()
            procs.append(proc)
            queues.append(q)
            logs.append(log)
        for i in range(len(chunks)):
            item = queues[i % workers].get()
            if isinstance(item, Exception):
                k = i % workers
                procs[k].wait()
                logs[k].seek(0)
                err = logs[k].read().decode(errors="replace").strip()
                raise RuntimeError(f"rendering worker {k} failed (exit code {procs[k].returncode}):\n{err}")
            yield from item
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        for log in logs:
            log.close()
