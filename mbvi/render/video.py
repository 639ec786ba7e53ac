"""Write rendered frames to a GIF (Pillow through imageio) or an MP4 (ffmpeg).

Frames are streamed to ffmpeg one by one; GIF frames are collected by the
Pillow plugin and written when the writer closes.
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["VIDEO_SUFFIXES", "VideoWriter"]

#: File suffixes :class:`VideoWriter` can write.
VIDEO_SUFFIXES = (".gif", ".mp4")


class VideoWriter:
    """Append RGB frames to a ``.gif`` or ``.mp4`` file.

    Parameters
    ----------
    path : str or Path
        Output file; the suffix picks the format.
    fps : float
        Frames per second.
    quality : float, default: 7
        MP4 quality, 0 (worst) … 10 (best), as in imageio-ffmpeg.

    Raises
    ------
    ValueError
        For a suffix other than ``.gif`` or ``.mp4``.

    Examples
    --------
    >>> with VideoWriter("out.gif", fps=10) as w:  # doctest: +SKIP
    ...     w.append(frame)
    """

    def __init__(self, path: str | Path, fps: float, *, quality: float = 7.0) -> None:
        self.path = Path(path)
        self.fps = float(fps)
        self.quality = quality
        self.suffix = self.path.suffix.lower()
        if self.suffix not in VIDEO_SUFFIXES:
            raise ValueError(f"cannot write video {str(self.path)!r}: use a .gif or .mp4 file name")
        self.frames = 0
        self._writer: Any = None
        self._size: tuple[int, int] | None = None

    def append(self, image: NDArray[np.uint8]) -> None:
        """Add one frame, shape (height, width, 3) or (height, width, 4), uint8."""
        image = np.ascontiguousarray(np.asarray(image, dtype=np.uint8)[..., :3])
        if self.suffix == ".mp4":
            image = _even(image)
        h, w = image.shape[:2]
        if self._writer is None:
            self._size = (w, h)
            self._open()
        elif (w, h) != self._size:
            raise ValueError(f"frame size {(w, h)} differs from the first frame's {self._size}")
        if self.suffix == ".gif":
            self._writer.write(image, duration=1000.0 / self.fps, loop=0, is_batch=False)
        else:
            self._writer.send(image)
        self.frames += 1

    def _open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.suffix == ".gif":
            import imageio.v3 as iio

            self._writer = iio.imopen(self.path, "w", plugin="pillow")
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
        self._writer.close()
        self._writer = None

    def __enter__(self) -> VideoWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _even(image: NDArray[np.uint8]) -> NDArray[np.uint8]:
    """Pad by edge replication to even width and height (yuv420p needs both)."""
    h, w = image.shape[:2]
    if h % 2 == 0 and w % 2 == 0:
        return image
    return np.pad(image, ((0, h % 2), (0, w % 2), (0, 0)), mode="edge")
