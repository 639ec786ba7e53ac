"""Whether a sampled scene can be drawn, and the point its drawing is centred on.

Graphics cards draw in single precision: about seven significant digits, and
nothing beyond 3.4e38. World coordinates cast to it lose a body's shape once
they are large next to its size (two 1 m cubes at 1e7 m: one gone, the other
a flat slab). The layers of :class:`mbvi.render.SceneView` therefore hold
coordinates relative to one fixed point near the scene, the centre of
everything drawn over all frames, and their actors stand at that point (VTK
composes an actor's place with the camera in double precision). This module
finds that centre, and refuses with a ValueError naming the element and the
time a scene that no picture could show: coordinates that are not finite (a
run that blew up), or so far from the centre that single precision cannot
hold them (a blown-up run at 1.8e79 m overflowed into a blank picture).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple, Protocol

import numpy as np
from numpy.typing import NDArray

from mbvi.render.frames import FrameData

__all__ = ["MAX_REACH", "TrailsLike", "drawing_origin"]

#: the farthest a drawn point may lie from the centre of the drawing, m: single precision holds 3.4e38, and the
#: camera's and the clipping planes' arithmetic needs headroom above the scene's size
MAX_REACH = 1e30


class TrailsLike(Protocol):
    """The part of :class:`mbvi.render.view.TrailSpec` read here."""

    names: list[str]
    points: NDArray[np.float64]  # (samples, b, 3), m
    times: NDArray[np.float64]  # (samples,), s


_ADVICE = "(the run blew up?); draw the samples before that: traj.head(k) for the first k, or snapshot(traj, frame=k)"


class _Drawn(NamedTuple):
    """One drawn array: what its elements are, their names, the times (and trajectory samples) of its frames."""

    what: str
    names: list[str]
    times: NDArray[np.float64]
    samples: NDArray[np.intp] | None
    values: NDArray[np.float64]  # (frames, m, 3) points, or (frames, m, 3, 3) rotations
    points: bool = True

    def at(self, frame: int, element: int) -> str:
        sample = "" if self.samples is None else f", sample {int(self.samples[frame])}"
        return f"{self.what} {self.names[element]!r} at t = {self.times[frame]:g} s{sample}"


def drawing_origin(data: FrameData, trails: TrailsLike | None = None) -> NDArray[np.float64]:
    """The fixed point a drawing of ``data`` is centred on: the centre of the box around every drawn point.

    Parameters
    ----------
    data : FrameData
        The sampled scene.
    trails : TrailSpec, optional
        Trails drawn with it (:class:`mbvi.render.view.TrailSpec`).

    Returns
    -------
    ndarray, shape (3,)
        The centre, m (the world's origin when nothing is drawn).

    Raises
    ------
    ValueError
        When a drawn position or rotation is not finite, or a drawn point lies
        more than :data:`MAX_REACH` from the centre; the message names the
        element, the time and the trajectory sample.
    """
    arrays = list(_drawn(data, trails))
    first: tuple[float, str] | None = None  # the earliest element that is not finite
    for a in arrays:
        bad = ~np.all(np.isfinite(a.values), axis=tuple(range(2, a.values.ndim)))  # (frames, m)
        if bad.any():
            f, i = np.argwhere(bad)[0]
            if first is None or a.times[f] < first[0]:
                first = (float(a.times[f]), a.at(f, i))
    if first is not None:
        raise ValueError(f"cannot draw the {first[1]}: it is not finite {_ADVICE}")
    pts = np.concatenate([a.values.reshape(-1, 3) for a in arrays if a.points])
    if not len(pts):
        return np.zeros(3)
    origin = 0.5 * (pts.min(axis=0) + pts.max(axis=0))
    for a in arrays:
        if not (a.points and a.values.size):
            continue
        reach = np.max(np.abs(a.values - origin), axis=-1)  # (frames, m)
        f, i = np.unravel_index(np.argmax(reach), reach.shape)
        if reach[f, i] > MAX_REACH:
            raise ValueError(
                f"cannot draw the {a.at(f, i)}: it is {float(reach[f, i]):.3g} m from the centre of the picture, "
                f"farther than the {MAX_REACH:g} m a picture can hold {_ADVICE}"
            )
    return origin


def _drawn(data: FrameData, trails: TrailsLike | None) -> Iterator[_Drawn]:
    """Every array of positions (and rotations) that a view of ``data`` with ``trails`` draws."""
    t, idx = data.times, data.indices
    rigid = [b.name for b in data.rigid]
    yield _Drawn("particle", data.particles, t, idx, data.particle_pos)
    yield _Drawn("rigid body", rigid, t, idx, data.rigid_pos)
    yield _Drawn("rotation of the rigid body", rigid, t, idx, data.rigid_rot, points=False)
    for kind, seg in data.segments.items():
        yield _Drawn(kind, seg.names, t, idx, seg.start)
        yield _Drawn(kind, seg.names, t, idx, seg.end)
    for marker in data.joints:
        names = [f"#{i}" for i in range(marker.position.shape[1])]
        yield _Drawn(f"{marker.kind} joint", names, t, idx, marker.position)
    for beam in data.beams:
        yield _Drawn("beam node", [f"{beam.name}[{i}]" for i in range(beam.nodes.shape[1])], t, idx, beam.nodes)
    anchors = [str(tuple(float(x) for x in a)) for a in data.world_anchors]
    yield _Drawn("world anchor", anchors, t[:1], None, data.world_anchors.reshape(1, -1, 3))
    if trails is not None and trails.names:
        yield _Drawn("trail of", trails.names, trails.times, None, trails.points)
