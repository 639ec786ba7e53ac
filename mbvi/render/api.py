"""User-facing rendering: :func:`snapshot`, :func:`animate` and :func:`show`."""

from __future__ import annotations

import logging
import math
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pyvista as pv
from numpy.typing import NDArray

from mbvi._validate import is_number
from mbvi.render.drawable import drawing_origin
from mbvi.render.frames import FrameData, TrajectoryLike, animation_indices, nearest_indices, window_pixels
from mbvi.render.video import VideoWriter, render_parallel
from mbvi.render.view import SceneView, TrailSpec, check_view_options

__all__ = ["animate", "show", "snapshot"]

log = logging.getLogger("mbvi")

_VIEW_OPTIONS = frozenset({"ground", "joints", "scale", "style", "scalar_bar", "time_label", "camera", "zoom"})
#: a trail is traced through at most this many evenly spaced trajectory samples (and every drawn frame's own)
_TRAIL_SAMPLES = 2000
#: animations with at least this many frames are drawn by worker processes (see :func:`animate`)
_PARALLEL_MIN_FRAMES = 48
_NO_FXAA_WINDOWS = ("vtkEGLRenderWindow", "vtkOSOpenGLRenderWindow")
#: image formats :func:`snapshot` writes: file suffix -> (imageio extension, writer options)
_IMAGE_FORMATS: dict[str, tuple[str, dict[str, Any]]] = {
    ".png": (".png", {}),
    ".jpg": (".jpeg", {"quality": 95}),
    ".jpeg": (".jpeg", {"quality": 95}),
}


def _as_trajectory(scene_or_traj: Any, func: str) -> TrajectoryLike:
    """A trajectory for ``scene_or_traj``: a Scene becomes its initial state; a trajectory of no states (``head(0)``)
    is a ValueError naming ``func`` (it was an IndexError from deep inside)."""
    from mbvi.scene import Scene
    from mbvi.trajectory import Trajectory

    if isinstance(scene_or_traj, Scene):
        return Trajectory.from_scene(scene_or_traj)
    if not len(np.atleast_1d(np.asarray(scene_or_traj.t))):
        raise ValueError(f"{func}(): the trajectory has no states to draw")
    return scene_or_traj  # type: ignore[no-any-return]


def _nothing_to_draw(traj: TrajectoryLike) -> bool:
    """Whether ``traj`` has no bodies, links or beams to draw: a :class:`mbvi.LagrangianSystem`'s run (its
    trajectory holds generalized coordinates only, also for a system built by ``LagrangianSystem.from_scene``)."""
    from mbvi.geometry import SceneGeometry

    geo = SceneGeometry.coerce(traj.geometry)
    return not (geo.bodies or geo.links or geo.beams)


def _no_bodies_message(traj: TrajectoryLike, what: str) -> str:
    """Why ``what`` (an animation, a 3D view) of a trajectory without bodies is refused, and what to use."""
    coordinates = list(getattr(traj, "coordinate_names", None) or [])
    if not coordinates:
        return f"the trajectory has no bodies, links or beams: {what} would be blank"
    return (
        f"a LagrangianSystem run (coordinates {', '.join(coordinates)}) has no bodies to draw, so {what} would be "
        f"blank; draw its phase portrait with mbvi.render.snapshot(traj, 'run.png') (or .jpg), or plot it with "
        f"mbvi.plot.phase_portrait(traj, {coordinates[0]!r})"
    )


def _check_frame(frame: Any, n: int) -> int:
    """The sample index ``frame`` (negative counts from the end) as 0 … n − 1.

    Raises
    ------
    ValueError
        For a frame that is not an integer (``1.5``, ``True``).
    IndexError
        For a frame out of range.
    """
    if isinstance(frame, bool) or not isinstance(frame, (int, np.integer)):
        raise ValueError(
            f"frame must be an integer sample index (negative counts from the end), got {frame!r}; for the sample "
            f"nearest a time t in s, use frame=int(np.argmin(np.abs(traj.t - t)))"
        )
    if not -n <= int(frame) < n:
        raise IndexError(f"frame {frame} out of range for a trajectory of {n} samples")
    return int(frame) % n


def _state_space_picture(traj: Any, frame: int, window_size: tuple[int, int]) -> NDArray[np.uint8]:
    """The picture ``mbvi run --render RUN.png`` draws of a LagrangianSystem run, up to sample ``frame``.

    :func:`mbvi.lagrangian.picture.picture`: the phase portrait of the first coordinate (two free angles: a
    trail on their torus), as an RGB array of ``window_size`` (width, height) pixels.
    """
    import tempfile

    import imageio.v3 as iio
    import matplotlib.pyplot as plt

    from mbvi.lagrangian.picture import picture

    if not np.asarray(traj.q).shape[1]:
        raise ValueError(_no_bodies_message(traj, "a picture"))
    figures = set(plt.get_fignums())
    try:
        with tempfile.TemporaryDirectory(prefix="mbvi-render-") as tmp:
            out = Path(tmp) / "picture.png"
            picture(traj.head(frame + 1), out, window_size=window_pixels(window_size, "snapshot"))
            image = iio.imread(out)
    finally:
        for number in set(plt.get_fignums()) - figures:  # the phase portrait's pyplot figure: never shown
            plt.close(number)
    image = np.asarray(image, dtype=np.uint8)
    if image.ndim == 2:
        image = np.repeat(image[..., None], 3, axis=-1)
    return np.ascontiguousarray(image[..., :3])


#: anti-aliasing methods (``anti_aliasing``: one of them or None)
ANTI_ALIASING = ("fxaa", "ssaa", "msaa")


def _check_options(opts: dict[str, Any], func: str, window_size: Any = (1, 1), trail_length: Any = None,
                   anti_aliasing: Any = None) -> None:  # fmt: skip
    """Unknown options a TypeError; values out of range a ValueError naming them, before anything is drawn (a
    negative window size had VTK allocate 7e13 elements and abort the process; a misspelt anti-aliasing or
    camera failed in a worker process, seconds later, naming PyVista's arguments)."""
    if anti_aliasing is not None and not (isinstance(anti_aliasing, str) and anti_aliasing.lower() in ANTI_ALIASING):
        raise ValueError(f"{func}(): anti_aliasing must be one of {', '.join(map(repr, ANTI_ALIASING))} or None, "
                         f"got {anti_aliasing!r}")  # fmt: skip
    unknown = sorted(set(opts) - _VIEW_OPTIONS)
    if unknown:
        raise TypeError(
            f"{func}() got unexpected keyword argument(s) {', '.join(unknown)}; "
            f"rendering options are {', '.join(sorted(_VIEW_OPTIONS | {'anti_aliasing', 'trail', 'trail_length'}))}"
        )
    window_pixels(window_size, func)
    if trail_length is not None and not (is_number(trail_length) and 0 < float(trail_length) < math.inf):
        raise ValueError(f"{func}(): trail_length must be a positive number of seconds or None, got {trail_length!r}")
    check_view_options(opts, func)


def _check_trail(trail: Any, func: str) -> bool | str | list[str] | None:
    """``trail`` as a bool, None, a body's name or a list of names; a ValueError naming ``trail`` for anything
    else (``trail=123`` was a TypeError from ``list()``, after the run was sampled)."""
    if trail is None or isinstance(trail, str):
        return trail
    if isinstance(trail, (bool, np.bool_)):
        return bool(trail)
    if isinstance(trail, Iterable) and not isinstance(trail, (bytes, dict)):
        names = list(trail)
        if all(isinstance(n, str) for n in names):
            return names
    raise ValueError(f"{func}(): trail must be True, False, None, a body's name or a list of bodies' names, "
                     f"got {trail!r}")  # fmt: skip


def _trail_names(data: FrameData, trail: bool | str | Iterable[str] | None) -> list[str]:
    """The bodies ``trail`` names (checked by :func:`_check_trail`): ``True`` every body, ``False``/None none."""
    if trail is None or trail is False:
        return []
    if trail is True:
        return data.particles + [b.name for b in data.rigid]
    if isinstance(trail, str):
        return [trail]
    return list(trail)


def _trail_samples(
    frames: NDArray[np.intp], last: int | None = None, budget: int = _TRAIL_SAMPLES
) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """Trajectory samples that trace a trail, and the last of them that each frame shows.

    The trail runs through up to ``budget`` evenly spaced samples ``0 … last`` (default: the last frame's) and
    through every frame's own sample, so that it is traced as densely as the run allows whatever the video's
    frame rate (through the frames alone, a pendulum at 5 frames per second and 4 times real time was drawn as
    chords 0.78 m inside its 1 m circle) and ends at the body in every frame.

    Parameters
    ----------
    frames : ndarray of int, shape (frames,)
        The trajectory sample each frame draws.
    last : int, optional
        Last sample of the trail.
    budget : int, default: :data:`_TRAIL_SAMPLES`
        Evenly spaced samples at most (besides the frames').

    Returns
    -------
    samples : ndarray of int, shape (samples,)
        Trajectory sample indices, increasing.
    upto : ndarray of int, shape (frames,)
        For each frame, the index into ``samples`` of the last sample at or before the frame's.
    """
    frames = np.asarray(frames, dtype=np.intp)
    last = int(frames.max()) if last is None else int(last)
    even = np.linspace(0, last, min(last + 1, budget)).round().astype(np.intp)
    samples = np.unique(np.concatenate([even, frames[frames <= last]]))
    upto = np.searchsorted(samples, frames, side="right") - 1
    return samples, np.maximum(upto, 0).astype(np.intp)


def _trail_spec(
    traj: TrajectoryLike, names: list[str], frames: NDArray[np.intp], length: float | None
) -> TrailSpec | None:
    """The trails of the bodies ``names`` for a view of the trajectory samples ``frames`` (see
    :func:`_trail_samples`); None without names."""
    if not names:
        return None
    sample_idx, upto = _trail_samples(frames)
    t = np.asarray(traj.t, dtype=float)
    points = np.stack([np.asarray(traj.position(n), dtype=float)[sample_idx] for n in names], axis=1)
    return TrailSpec(names, points, t[sample_idx], upto, length)


#: VTK's SSAA pass draws at √5 times the window's size, within the largest framebuffer OpenGL gives (Mesa: 16384)
_SSAA_SCALE, _MAX_FRAMEBUFFER = math.sqrt(5.0), 16384


def _plotter(window_size: tuple[int, int], off_screen: bool, anti_aliasing: str | None) -> pv.Plotter:
    size = [round(float(window_size[0])), round(float(window_size[1]))]
    plotter = pv.Plotter(off_screen=off_screen, window_size=size)
    if anti_aliasing:
        kind = anti_aliasing.lower()
        if kind == "fxaa" and type(plotter.ren_win).__name__ in _NO_FXAA_WINDOWS:
            kind = "ssaa"  # FXAA renders black under EGL/OSMesa; PyVista would warn and do this too
        if kind == "ssaa" and max(size) * _SSAA_SCALE > _MAX_FRAMEBUFFER:
            # SSAA draws √5 times larger than the window: past the framebuffer's limit the picture came out
            # all black (8000 px wide), with a wall of VTK errors; drawn without it, it is right up to 16384 px
            log.info("anti-aliasing off for a %d×%d picture: SSAA would need a framebuffer over %d px", *size,
                     _MAX_FRAMEBUFFER)  # fmt: skip
            return plotter
        plotter.enable_anti_aliasing(kind)
    return plotter


def _grab(plotter: pv.Plotter) -> NDArray[np.uint8]:
    plotter.render()
    img = plotter.screenshot(None, return_img=True)
    return np.asarray(img, dtype=np.uint8)


def snapshot(
    scene_or_traj: Any,
    path: str | os.PathLike[str] | None = None,
    *,
    frame: int = -1,
    window_size: tuple[int, int] = (800, 600),
    trail: bool | str | Iterable[str] | None = False,
    trail_length: float | None = None,
    anti_aliasing: str | None = "ssaa",
    **opts: Any,
) -> NDArray[np.uint8]:
    """Render one frame of a scene or trajectory to a PNG or JPEG image, off screen.

    Parameters
    ----------
    scene_or_traj : mbvi.Scene or mbvi.Trajectory
        What to draw; a scene is drawn in its initial state.
    path : str or PathLike, optional
        Image file to write (parent directories are created): ``.png``, or
        ``.jpg``/``.jpeg`` for a JPEG (quality 95). ``None`` only returns the
        image.
    frame : int, default: -1
        Trajectory sample to draw (negative counts from the end).
    window_size : (int, int), default: (800, 600)
        Image width and height, pixels.
    trail : bool, str or list of str, default: False
        Draw the path travelled up to ``frame``: ``True`` for every body, or
        the names of the bodies to trace. It runs through up to 2000 evenly
        spaced trajectory samples.
    trail_length : float, optional
        Only trace the last ``trail_length`` seconds.
    anti_aliasing : {"ssaa", "fxaa", "msaa", None}, default: "ssaa"
        Anti-aliasing method.
    **opts
        ``ground`` (bool or ``"grid"``), ``joints`` (bool), ``scale`` (float,
        multiplies element sizes), ``style`` (:class:`mbvi.render.Style`),
        ``scalar_bar`` (bool), ``time_label`` (bool), ``camera`` (``"iso"``,
        ``"xy"``, ``"xz"``, ``"yz"`` or a PyVista camera position) and
        ``zoom`` (float); see :class:`mbvi.render.SceneView`.

    Returns
    -------
    ndarray of uint8, shape (height, width, 3)
        The rendered image.

    Raises
    ------
    IndexError
        If ``frame`` is out of range.
    TypeError
        For an unknown option.
    ValueError
        If ``path`` has another suffix than ``.png``, ``.jpg`` or ``.jpeg``,
        an option is out of range (``trail`` names no bodies, ``camera``
        cannot show anything: both checked before anything is drawn),
        ``frame`` is not an integer, or a drawn position is not finite or too far from the rest to draw (a
        run that blew up; the message names the body and the time).

    Notes
    -----
    A :class:`mbvi.LagrangianSystem`'s run has no bodies to draw (its
    trajectory holds generalized coordinates only): its picture is the one
    ``mbvi run --render RUN.png`` draws, the phase portrait of its first
    coordinate (two free angles: a trail on their torus), over the samples
    up to ``frame``; the view options do not apply to it.

    Examples
    --------
    >>> scene = mbvi.Scene()  # doctest: +SKIP
    >>> scene.add(mbvi.Particle("a", mass=1.0, position=(1, 0, 0)))  # doctest: +SKIP
    >>> scene.add(mbvi.Rod("world", "a"))  # doctest: +SKIP
    >>> mbvi.render.snapshot(scene, "scene.png")  # doctest: +SKIP
    """
    _check_options(opts, "snapshot", window_size, trail_length, anti_aliasing)
    trail = _check_trail(trail, "snapshot")
    image_format = None if path is None else _image_format(path)
    traj = _as_trajectory(scene_or_traj, "snapshot")
    f = _check_frame(frame, len(np.asarray(traj.t)))
    if _nothing_to_draw(traj):  # a LagrangianSystem run: its state-space picture, as `mbvi run --render` draws
        image = _state_space_picture(traj, f, window_size)
    else:
        data = FrameData.from_trajectory(traj, [f])
        trails = _trail_spec(traj, _trail_names(data, trail), np.array([f]), trail_length)
        plotter = _plotter(window_size, True, anti_aliasing)
        try:
            SceneView(plotter, data, trails=trails, **opts)
            image = _grab(plotter)
        finally:
            plotter.close()
    if path is not None and image_format is not None:
        import imageio.v3 as iio

        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        extension, options = image_format
        iio.imwrite(out, image, extension=extension, **options)
    return image


def _image_format(path: str | os.PathLike[str]) -> tuple[str, dict[str, Any]]:
    """The format :func:`snapshot` writes ``path`` in, from its suffix; ValueError for an unsupported one."""
    suffix = Path(path).suffix.lower()
    if suffix not in _IMAGE_FORMATS:
        raise ValueError(
            f"cannot write image {str(path)!r}: use a {', '.join(_IMAGE_FORMATS)} file name "
            f"(videos: mbvi.render.animate to .gif or .mp4)"
        )
    return _IMAGE_FORMATS[suffix]


def animate(
    traj: Any,
    path: str | os.PathLike[str],
    *,
    fps: float = 30.0,
    speed: float = 1.0,
    window_size: tuple[int, int] = (640, 480),
    trail: bool | str | Iterable[str] | None = False,
    trail_length: float | None = None,
    progress: bool = False,
    anti_aliasing: str | None = "fxaa",
    quality: float = 7.0,
    workers: int | None = None,
    **opts: Any,
) -> Path:
    """Render a trajectory to an animated GIF or an MP4 video, off screen.

    The video shows the trajectory's duration ``T`` at ``speed`` times real
    time: it has ``round(T / speed * fps) + 1`` frames at times
    ``t0 + j * speed / fps``, each drawn from the nearest trajectory sample.

    Parameters
    ----------
    traj : mbvi.Trajectory
        The motion to show (a trajectory loaded from disk works too).
    path : str or PathLike
        Output file, ``.gif`` or ``.mp4``.
    fps : float, default: 30
        Frames per second of the video.
    speed : float, default: 1
        Playback speed relative to real time.
    window_size : (int, int), default: (640, 480)
        Frame width and height, pixels.
    trail : bool, str or list of str, default: False
        Trace the path of every body (``True``) or of the named bodies. The
        trail runs through up to 2000 evenly spaced trajectory samples and
        every frame's own, not only through the video's frames (a fast
        pendulum at a low ``fps`` would be drawn as chords across its arc).
    trail_length : float, optional
        Only trace the last ``trail_length`` seconds.
    progress : bool, default: False
        Show a progress bar (tqdm) on stderr.
    anti_aliasing : {"fxaa", "ssaa", "msaa", None}, default: "fxaa"
        Anti-aliasing method (``"ssaa"`` is smoother and slower). FXAA does
        not work with the headless EGL window, which then uses SSAA.
    quality : float, default: 7
        MP4 quality, 1 (worst) … 10 (best).
    workers : int, optional
        Processes that draw the frames. Default: 2 (1 on a one-core machine)
        for animations of at least 48 frames, else 1 (this process). Workers
        are started with ``spawn`` and each costs about a second to start;
        the video is the same either way.
    **opts
        View options as in :func:`snapshot`; ``time_label`` defaults to True.

    Returns
    -------
    pathlib.Path
        The written file.

    Raises
    ------
    ValueError
        If the suffix is not ``.gif``/``.mp4``, ``fps``/``speed`` is not
        positive, another option is out of range (checked before anything is
        drawn), or ``traj`` has no bodies to draw (a
        :class:`mbvi.LagrangianSystem`'s run: draw its phase portrait with
        :func:`snapshot` to a ``.png`` or ``.jpg`` instead), or a drawn
        position is not finite or too far from the rest to draw (a run that
        blew up; the message names the body and the time).
    TypeError
        For an unknown option.

    Warns
    -----
    UserWarning
        For a GIF above 50 frames per second, which viewers play slower.

    Notes
    -----
    GIF stores frame durations in whole hundredths of a second: frame ``j``
    starts at ``j / fps`` rounded to the nearest 0.01 s (at 30 fps the
    delays run 3, 4, 3, 3, 4, 3… cs), so the GIF keeps real time times
    ``speed`` without drifting. Pillow merges consecutive identical frames
    (adding their durations); the time label keeps frames distinct.
    """
    _check_options(opts, "animate", window_size, trail_length, anti_aliasing)
    trail = _check_trail(trail, "animate")
    if workers is not None and not (is_number(workers) and float(workers).is_integer() and workers >= 1):
        raise ValueError(f"animate(): workers must be a whole number of processes >= 1 or None, got {workers!r}")
    opts.setdefault("time_label", True)
    traj = _as_trajectory(traj, "animate")
    out = Path(path)
    writer = VideoWriter(out, fps, quality=quality)  # validates the suffix before any work
    if _nothing_to_draw(traj):
        raise ValueError(f"cannot animate to {str(path)!r}: {_no_bodies_message(traj, 'every frame')}")
    indices = animation_indices(traj.t, fps, speed)
    data = FrameData.from_trajectory(traj, indices)
    trails = _trail_spec(traj, _trail_names(data, trail), indices, trail_length)
    drawing_origin(data, trails)  # a run that blew up is refused here, not in a worker
    if workers is None:
        workers = min(2, os.cpu_count() or 1) if len(indices) >= _PARALLEL_MIN_FRAMES else 1
    workers = int(workers)
    bar = _progress(len(indices), progress, out.name)
    if workers > 1:
        with writer:
            for frame in render_parallel(data, trails, opts, window_size, anti_aliasing, writer.suffix, workers):
                writer.append_encoded(frame)
                if bar is not None:
                    bar.update(1)
    else:
        plotter = _plotter(window_size, True, anti_aliasing)
        try:
            view = SceneView(plotter, data, trails=trails, **opts)
            with writer:
                for j in range(len(indices)):
                    view.show_frame(j)
                    writer.append(_grab(plotter))
                    if bar is not None:
                        bar.update(1)
        finally:
            plotter.close()
    if bar is not None:
        bar.close()
    return out


def _progress(total: int, enabled: bool, name: str) -> Any:
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=f"render {name}", unit="frame", file=sys.stderr)


def _interactive_available() -> bool:
    """Whether :func:`show` can open a window or draw into a notebook."""
    if "ipykernel" in sys.modules:
        return True
    return os.environ.get("VTK_DEFAULT_OPENGL_WINDOW") != "vtkEGLRenderWindow"


def show(
    scene_or_traj: Any,
    *,
    frame: int = -1,
    window_size: tuple[int, int] = (1024, 768),
    trail: bool | str | Iterable[str] | None = False,
    max_frames: int = 2000,
    anti_aliasing: str | None = "ssaa",
    **opts: Any,
) -> pv.Plotter:
    """Open an interactive view (a window, or inline in a notebook).

    A trajectory gets a time slider. Inside Jupyter the view is drawn by
    PyVista's ``trame`` backend with server-side rendering (off screen, so it
    works on headless servers through EGL, no X display needed): the slider
    and the camera are live in the notebook. Without trame
    (``pip install 'mbvi[notebook]'``) it falls back to a static image, with a
    warning.

    Parameters
    ----------
    scene_or_traj : mbvi.Scene or mbvi.Trajectory
        What to show.
    frame : int, default: -1
        Sample shown first.
    window_size : (int, int), default: (1024, 768)
        Window size, pixels.
    trail : bool, str or list of str, default: False
        Trace bodies' paths up to the shown time, through up to 2000 evenly
        spaced trajectory samples and every slider step's own.
    max_frames : int, default: 2000
        The slider steps through at most this many evenly spaced samples.
    anti_aliasing : str or None, default: "ssaa"
        Anti-aliasing method.
    **opts
        View options as in :func:`snapshot`.

    Returns
    -------
    pyvista.Plotter
        The plotter (closed when the window is closed).

    Raises
    ------
    RuntimeError
        When there is no display (headless, outside a notebook): use
        :func:`snapshot` or :func:`animate` instead.
    ValueError
        If ``frame`` is not an integer, an option is out of range,
        ``scene_or_traj`` has no bodies
        to draw (a :class:`mbvi.LagrangianSystem`'s run: draw its phase
        portrait with :func:`snapshot` instead), or a drawn position is not
        finite or too far from the rest to draw.
    IndexError
        If ``frame`` is out of range.
    """
    _check_options(opts, "show", window_size, anti_aliasing=anti_aliasing)
    trail = _check_trail(trail, "show")
    traj = _as_trajectory(scene_or_traj, "show")
    if _nothing_to_draw(traj):
        raise ValueError(f"cannot show it: {_no_bodies_message(traj, 'the view')}")
    notebook = _in_notebook()
    if not notebook and not _interactive_available():
        raise RuntimeError(
            "mbvi.render.show needs a display (none found: rendering is headless); "
            "use mbvi.render.snapshot() or mbvi.render.animate() instead"
        )
    t = np.asarray(traj.t, dtype=float)
    first = _check_frame(frame, len(t))
    indices = np.unique(np.linspace(0, len(t) - 1, min(len(t), max_frames)).round().astype(np.intp))
    data = FrameData.from_trajectory(traj, indices)
    trails = _trail_spec(traj, _trail_names(data, trail), indices, None)
    plotter = _plotter(window_size, notebook, anti_aliasing)  # in a notebook: off screen, shown by trame
    opts.setdefault("time_label", len(indices) > 1)
    view = SceneView(plotter, data, trails=trails, **opts)
    start = int(nearest_indices(data.times, [t[first]])[0])
    view.show_frame(start)
    if len(indices) > 1:

        def on_slide(value: float) -> None:
            view.show_frame(int(nearest_indices(data.times, [value])[0]))

        plotter.add_slider_widget(
            on_slide,
            rng=(float(data.times[0]), float(data.times[-1])),
            value=float(data.times[start]),
            title="t [s]",
            fmt="%.3f",
            pointa=(0.25, 0.08),
            pointb=(0.75, 0.08),
        )
    if notebook:
        plotter.show(jupyter_backend=_notebook_backend())
    else:
        plotter.show()
    return plotter


def _in_notebook() -> bool:
    """Whether we run inside a Jupyter kernel (IPython with a kernel, not a terminal shell)."""
    if "ipykernel" not in sys.modules:
        return False
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def _notebook_backend() -> str:
    """PyVista's Jupyter backend for :func:`show`: ``"trame"`` (interactive, server-side rendering, so the
    time slider works on headless servers through EGL) when trame is installed, else ``"static"`` (an image)
    with a warning saying what to install."""
    import importlib.util
    import warnings

    if all(importlib.util.find_spec(m) is not None for m in ("trame", "trame_vtk", "trame_vuetify")):
        return "trame"
    warnings.warn(
        "mbvi.render.show: trame is not installed, showing a static image; for an interactive view with a time "
        "slider: pip install 'mbvi[notebook]' (or 'pyvista[jupyter]')",
        UserWarning,
        stacklevel=3,
    )
    return "static"
