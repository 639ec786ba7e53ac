"""Everything a rendered scene needs, sampled from a trajectory into arrays.

:class:`FrameData` reads a :class:`mbvi.Trajectory` once — positions,
rotations and attachment points of every drawable element at the sampled
time indices — so that drawing frame ``j`` is pure array indexing. It uses
only the trajectory's public views and its typed ``geometry``
(:class:`mbvi.geometry.SceneGeometry`: anchors and axes in the body frames),
so a trajectory loaded from disk (without its scene) renders the same, and a
trajectory that does not start at the assembly pose draws its joints where
the physics has them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray

from mbvi._validate import is_number
from mbvi.geometry import JOINT_KINDS, SEGMENT_KINDS, BodyGeometry, SceneGeometry

__all__ = [
    "MAX_FRAMES",
    "BeamData",
    "FrameData",
    "JointMarkers",
    "SegmentSet",
    "TrajectoryLike",
    "animation_indices",
    "frame_count",
    "nearest_indices",
]

WORLD = "world"


class TrajectoryLike(Protocol):
    """The part of :class:`mbvi.Trajectory` that rendering reads."""

    t: NDArray[np.float64]

    @property
    def geometry(self) -> SceneGeometry: ...

    def position(self, name: str) -> NDArray[np.float64]: ...

    def rotation(self, name: str) -> NDArray[np.float64]: ...

    def point(self, name: str, anchor: ArrayLike) -> NDArray[np.float64]: ...


def nearest_indices(t: ArrayLike, times: ArrayLike) -> NDArray[np.intp]:
    """Index of the sample of ``t`` nearest to each of ``times``.

    Parameters
    ----------
    t : array_like, shape (n,)
        Increasing sample times, s.
    times : array_like, shape (m,)
        Requested times, s.

    Returns
    -------
    ndarray of int, shape (m,)
    """
    t = np.asarray(t, dtype=float)
    times = np.asarray(times, dtype=float)
    right = np.clip(np.searchsorted(t, times), 1, max(len(t) - 1, 1))
    left = right - 1
    if len(t) == 1:
        return np.zeros(len(times), dtype=np.intp)
    choose_left = np.abs(times - t[left]) <= np.abs(t[right] - times)
    return np.where(choose_left, left, right).astype(np.intp)


#: the lowest frame rate a video may have, 1/s (a frame per 100 s: a GIF's frame delay is a 16-bit count of
#: hundredths of a second, and ffmpeg rounded a rate of 1e-7 to 0)
MIN_FPS = 0.01


def check_fps(fps: float) -> None:
    """A ValueError naming ``fps`` unless it is a finite number of frames per second of at least :data:`MIN_FPS`."""
    if not (is_number(fps) and MIN_FPS <= float(fps) < math.inf):
        raise ValueError(f"fps must be a finite number of frames per second, at least {MIN_FPS:g}, got {fps!r}")


#: the largest picture side, pixels (Mesa's largest framebuffer)
MAX_PIXELS = 16384


def window_pixels(window_size: object, func: str) -> tuple[int, int]:
    """``window_size`` as (width, height) whole pixels, each 1 … :data:`MAX_PIXELS`; a ValueError naming ``func``'s
    ``window_size`` otherwise (a negative size had VTK allocate 7e13 elements and abort the process)."""
    try:
        w, h = window_size  # type: ignore[misc]
        ok = is_number(w) and is_number(h)
        pixels = [round(float(x)) for x in (w, h)] if ok else []
        ok = ok and all(1 <= x <= MAX_PIXELS for x in pixels)
    except (TypeError, ValueError, OverflowError):
        ok = False
    if not ok:
        raise ValueError(
            f"{func}(): window_size must be two numbers of pixels in 1 … {MAX_PIXELS}, got {window_size!r}"
        )
    return pixels[0], pixels[1]


#: the most frames an animation may have (an hour at 60 fps is 216 000): past it, fps or speed is a slip
MAX_FRAMES = 1_000_000


def frame_count(duration: float, fps: float, speed: float = 1.0) -> int:
    """Frames of an animation of ``duration`` s of motion at ``fps`` and ``speed``; a ValueError naming both when
    they would make more than :data:`MAX_FRAMES` (speed 1e-12 asked for 6e13 frames, and 437 TiB)."""
    frames = duration / speed * fps + 1
    if not frames <= MAX_FRAMES:
        raise ValueError(
            f"fps = {fps:g} and speed = {speed:g} make {frames:.3g} frames of {duration:g} s of motion, more than "
            f"{MAX_FRAMES:,}: raise speed or lower fps"
        )
    return round(duration / speed * fps) + 1


def animation_indices(t: ArrayLike, fps: float, speed: float = 1.0) -> NDArray[np.intp]:
    """Trajectory indices of the frames of an animation.

    The animation shows the trajectory's duration ``T`` at ``speed`` times
    real time, so it has ``round(T / speed * fps) + 1`` frames, at times
    ``t0 + j * speed / fps`` (each mapped to the nearest sample).

    Parameters
    ----------
    t : array_like, shape (n,)
        Sample times of the trajectory, s.
    fps : float
        Frames per second of the video, 1/s.
    speed : float, default: 1
        Playback speed relative to real time (2 = twice as fast).

    Returns
    -------
    ndarray of int, shape (frames,)

    Raises
    ------
    ValueError
        If ``fps`` is under :data:`MIN_FPS` or not finite, or ``speed`` is not positive and finite.
    """
    check_fps(fps)
    if not (is_number(speed) and 0 < float(speed) < math.inf):
        raise ValueError(f"speed must be a positive finite number, got {speed}")
    t = np.asarray(t, dtype=float)
    duration = float(t[-1] - t[0])
    frames = frame_count(duration, fps, speed)
    times = t[0] + np.arange(frames) * (speed / fps)
    return nearest_indices(t, np.minimum(times, t[-1]))


@dataclass
class SegmentSet:
    """Straight two-point elements (rods, springs, dampers, bones).

    Attributes
    ----------
    names : list of str
        Element names, length ``m``.
    start, end : ndarray, shape (frames, m, 3)
        World positions of the two attachment points, m.
    """

    names: list[str]
    start: NDArray[np.float64]
    end: NDArray[np.float64]

    def __len__(self) -> int:
        return len(self.names)


@dataclass
class JointMarkers:
    """Markers drawn at joints of one type.

    Attributes
    ----------
    kind : str
        ``"spherical"``, ``"revolute"``, ``"prismatic"`` or ``"fixed"``.
    position : ndarray, shape (frames, m, 3)
        Joint point in the world, m.
    axis : ndarray, shape (frames, m, 3)
        Unit joint axis in the world (``z`` for joints without one).
    """

    kind: str
    position: NDArray[np.float64]
    axis: NDArray[np.float64]


@dataclass
class BeamData:
    """One beam sampled at the animation frames.

    Attributes
    ----------
    name : str
        Beam name.
    nodes : ndarray, shape (frames, k, 3)
        Node positions, m.
    rest_lengths : ndarray, shape (k - 1,)
        Segment rest lengths, m.
    """

    name: str
    nodes: NDArray[np.float64]
    rest_lengths: NDArray[np.float64]

    def strain(self, frame: int) -> NDArray[np.float64]:
        """Axial strain of each segment, ``|x_{i+1} - x_i| / l0_i - 1``, shape (k - 1,)."""
        seg = np.linalg.norm(np.diff(self.nodes[frame], axis=0), axis=1)
        return seg / self.rest_lengths - 1.0

    def node_strain(self, frame: int) -> NDArray[np.float64]:
        """Strain averaged onto the nodes, shape (k,)."""
        s = self.strain(frame)
        out = np.empty(len(s) + 1)
        out[0], out[-1] = s[0], s[-1]
        out[1:-1] = 0.5 * (s[:-1] + s[1:])
        return out

    @property
    def length(self) -> float:
        """Total rest length, m."""
        return float(self.rest_lengths.sum())


@dataclass
class FrameData:
    """Arrays of everything drawable at the sampled frames of a trajectory.

    Build with :meth:`from_trajectory`.

    Attributes
    ----------
    indices : ndarray of int, shape (frames,)
        Trajectory sample index of each frame.
    times : ndarray, shape (frames,)
        Time of each frame, s.
    particles : list of str
        Free particles drawn as spheres (beam nodes excluded).
    particle_mass : ndarray, shape (p,)
        Their masses, kg.
    particle_pos : ndarray, shape (frames, p, 3)
        Their positions, m.
    rigid : list of BodyGeometry
        The rigid bodies.
    rigid_pos : ndarray, shape (frames, r, 3)
        Rigid body origins, m.
    rigid_rot : ndarray, shape (frames, r, 3, 3)
        Body-to-world rotations.
    segments : dict of str to SegmentSet
        ``"rod"``, ``"spring"``, ``"damper"`` and ``"bone"`` (from a rigid
        body's origin to the joints it carries).
    joints : list of JointMarkers
        One entry per joint type present.
    beams : list of BeamData
    world_anchors : ndarray, shape (a, 3)
        Distinct world points that elements attach to, m.
    length_scale : float
        Typical size of the scene, m.
    gravity : ndarray, shape (3,)
        Gravity vector, m/s².
    """

    indices: NDArray[np.intp]
    times: NDArray[np.float64]
    particles: list[str]
    particle_mass: NDArray[np.float64]
    particle_pos: NDArray[np.float64]
    rigid: list[BodyGeometry]
    rigid_pos: NDArray[np.float64]
    rigid_rot: NDArray[np.float64]
    segments: dict[str, SegmentSet]
    joints: list[JointMarkers]
    beams: list[BeamData]
    world_anchors: NDArray[np.float64]
    length_scale: float
    gravity: NDArray[np.float64]
    _positions: dict[str, NDArray[np.float64]] = field(default_factory=dict, repr=False)

    @property
    def n_frames(self) -> int:
        """Number of sampled frames."""
        return len(self.indices)

    @classmethod
    def from_trajectory(cls, traj: TrajectoryLike, indices: ArrayLike) -> FrameData:
        """Sample every drawable element of ``traj`` at ``indices``.

        Parameters
        ----------
        traj : mbvi.Trajectory
            The trajectory (its ``geometry`` says what to draw).
        indices : array_like of int, shape (frames,)
            Trajectory sample indices to keep (negative values count from the end).

        Returns
        -------
        FrameData
        """
        t = np.asarray(traj.t, dtype=float)
        idx = np.asarray(indices, dtype=np.intp) % len(t)
        geo = SceneGeometry.coerce(traj.geometry)
        beam_nodes = {n for b in geo.beams for n in b.nodes}
        frames = len(idx)

        cache: dict[str, NDArray[np.float64]] = {}

        def pos(name: str) -> NDArray[np.float64]:
            if name not in cache:
                cache[name] = np.zeros((frames, 3)) if name == WORLD else np.asarray(traj.position(name), float)[idx]
            return cache[name]

        rot_cache: dict[str, NDArray[np.float64]] = {}
        kinds = {b.name: b.kind for b in geo.bodies}

        def rot(name: str) -> NDArray[np.float64]:
            if name not in rot_cache:
                if name == WORLD or kinds.get(name) != "rigid":
                    rot_cache[name] = np.broadcast_to(np.eye(3), (frames, 3, 3))
                else:
                    rot_cache[name] = np.asarray(traj.rotation(name), float)[idx]
            return rot_cache[name]

        def point(name: str, anchor: ArrayLike) -> NDArray[np.float64]:
            a = np.asarray(anchor, dtype=float)
            if name == WORLD:
                return np.broadcast_to(a, (frames, 3)).copy()
            if not np.any(a):
                return pos(name)
            return np.asarray(traj.point(name, a), dtype=float)[idx]

        particles = [b for b in geo.bodies if b.kind == "particle" and b.name not in beam_nodes]
        rigid = [b for b in geo.bodies if b.kind == "rigid"]
        particle_pos = _stack([pos(b.name) for b in particles], frames)
        rigid_pos = _stack([pos(b.name) for b in rigid], frames)
        rigid_rot = np.stack([rot(b.name) for b in rigid], axis=1) if rigid else np.zeros((frames, 0, 3, 3))

        seg_lists: dict[str, tuple[list[str], list[NDArray], list[NDArray]]] = {
            k: ([], [], []) for k in (*SEGMENT_KINDS, "bone")
        }
        joint_lists: dict[str, tuple[list[NDArray], list[NDArray]]] = {}
        anchors: list[tuple[float, float, float]] = []
        for link in geo.links:
            a, b = link.a, link.b
            for body, anchor in ((a, link.anchor_a), (b, link.anchor_b)):
                if body == WORLD:
                    anchors.append(anchor)
            if link.kind in SEGMENT_KINDS:
                names, s, e = seg_lists[link.kind]
                names.append(link.name)
                s.append(point(a, link.anchor_a))
                e.append(point(b, link.anchor_b))
                continue
            if link.kind not in JOINT_KINDS:
                continue
            where = point(b, link.anchor_b) if b != WORLD else point(a, link.anchor_a)
            if link.axis_a is None:
                axis = np.broadcast_to([0.0, 0.0, 1.0], (frames, 3))
            else:  # the axis physics knows: fixed in a's frame, carried by a's rotation
                axis = np.einsum("fij,j->fi", rot(a), np.asarray(link.axis_a, dtype=float))
            plist, alist = joint_lists.setdefault(link.kind, ([], []))
            plist.append(where)
            alist.append(axis)
            # Bones from rigid bodies' origins to the joint point.
            for body, anchor in ((a, link.anchor_a), (b, link.anchor_b)):
                if body != WORLD and kinds.get(body) == "rigid" and np.any(anchor):
                    names, s, e = seg_lists["bone"]
                    names.append(f"{link.name}:{body}")
                    s.append(pos(body))
                    e.append(point(body, anchor))

        segments = {
            kind: SegmentSet(names, _stack(s, frames), _stack(e, frames)) for kind, (names, s, e) in seg_lists.items()
        }
        joints = [
            JointMarkers(kind, np.stack(p, axis=1), np.stack(ax, axis=1)) for kind, (p, ax) in joint_lists.items()
        ]
        beams = [
            BeamData(b.name, np.stack([pos(n) for n in b.nodes], axis=1), np.asarray(b.rest_lengths, dtype=float))
            for b in geo.beams
        ]
        world_anchors = np.unique(np.asarray(anchors, dtype=float).reshape(-1, 3).round(12), axis=0)
        length_scale = float(geo.length_scale or 1.0)
        if len(particles) + len(rigid) <= 1 and len(world_anchors):
            # one body: the geometry's scale (the bodies' extent) is its 1 m fallback; the size is the reach from
            # the anchors (a 100 m pendulum's bob was drawn for 1 m, invisible)
            first = np.concatenate([world_anchors, particle_pos[0].reshape(-1, 3), rigid_pos[0].reshape(-1, 3)])
            first = first[np.all(np.isfinite(first), axis=1)]
            reach = float(np.max(np.ptp(first, axis=0))) if len(first) > 1 else 0.0
            length_scale = reach if reach > 0 else length_scale
        return cls(
            indices=idx,
            times=t[idx],
            particles=[b.name for b in particles],
            particle_mass=np.asarray([b.mass for b in particles], dtype=float),
            particle_pos=particle_pos,
            rigid=rigid,
            rigid_pos=rigid_pos,
            rigid_rot=rigid_rot,
            segments=segments,
            joints=joints,
            beams=beams,
            world_anchors=world_anchors,
            length_scale=length_scale,
            gravity=np.asarray(geo.gravity, dtype=float),
            _positions=cache,
        )

    def body_positions(self, name: str, traj: TrajectoryLike | None = None) -> NDArray[np.float64]:
        """Positions of body ``name`` at the frames, shape (frames, 3)."""
        if name in self._positions:
            return self._positions[name]
        if traj is None:
            raise KeyError(name)
        self._positions[name] = np.asarray(traj.position(name), float)[self.indices]
        return self._positions[name]

    def all_points(self) -> NDArray[np.float64]:
        """Every drawn point at every frame, shape (N, 3) — for camera bounds."""
        parts = [self.particle_pos.reshape(-1, 3), self.rigid_pos.reshape(-1, 3), self.world_anchors]
        for seg in self.segments.values():
            parts += [seg.start.reshape(-1, 3), seg.end.reshape(-1, 3)]
        parts += [b.nodes.reshape(-1, 3) for b in self.beams]
        pts = np.concatenate(parts) if parts else np.zeros((0, 3))
        return pts[np.all(np.isfinite(pts), axis=1)]

    def typical_link_length(self) -> float | None:
        """Median initial length of rods, springs, dampers and bones, m (None if none)."""
        lengths = [np.linalg.norm(seg.end[0] - seg.start[0], axis=1) for seg in self.segments.values() if len(seg)]
        if not lengths:
            return None
        flat = np.concatenate(lengths)
        flat = flat[flat > 1e-9]
        return float(np.median(flat)) if len(flat) else None


def _stack(arrays: list[NDArray[np.float64]], frames: int) -> NDArray[np.float64]:
    """Stack (frames, 3) arrays into (frames, m, 3), empty-safe."""
    if not arrays:
        return np.zeros((frames, 0, 3))
    return np.stack(arrays, axis=1)
