"""Rendering cost of a 100-link chain against an empty scene (headless).

Renders a 60-frame, 640×480 animation of a hanging 100-link chain (100
particles, 100 rods) and, in the same process, 60 frames of an empty scene
through the same plotter set-up and video writer. Prints wall-clock times
and their ratio; nothing is asserted. The per-frame cost of moving the
chain (``SceneView.show_frame``: in-place array updates) is reported apart
from the draw-and-read-back cost.

With ``--workers``, it instead measures what the issue of slow animations
measured: a 301-frame, 640×480 GIF of a pendulum (10 s at 30 frames/s), drawn
in this process (``workers=1``, the old path) and by worker processes
(``workers=2``, the default), each ``--repeat`` times, and prints frames/s
(median, min … max) and the ratio of the medians.

Run::

    python benchmarks/bench_render.py [--links 100] [--frames 60] [--format mp4]
    python benchmarks/bench_render.py --workers [--repeat 3] [--format gif]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

import mbvi


def chain_scene(links: int, length: float = 2.0) -> mbvi.Scene:
    """A chain of ``links`` particles on rods, pinned at the origin, released at 45° below horizontal."""
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    step = length / links / np.sqrt(2.0)
    for i in range(1, links + 1):
        scene.add(mbvi.Particle(f"p{i}", mass=1.0 / links, position=(i * step, 0.0, -i * step)))
        scene.add(mbvi.Rod("world" if i == 1 else f"p{i - 1}", f"p{i}"))
    return scene


def empty_baseline(frames: int, window_size: tuple[int, int], path: Path, aa: str | None) -> float:
    """Seconds to draw, read back and encode ``frames`` frames of an empty scene."""
    from mbvi.render.api import _grab, _plotter
    from mbvi.render.video import VideoWriter

    start = time.perf_counter()
    plotter = _plotter(window_size, True, aa)
    plotter.set_background("white")
    try:
        with VideoWriter(path, fps=30) as writer:
            for _ in range(frames):
                writer.append(_grab(plotter))
    finally:
        plotter.close()
    return time.perf_counter() - start


def update_cost(traj: mbvi.Trajectory, fps: float, window_size: tuple[int, int]) -> float:
    """Mean seconds per ``SceneView.show_frame`` (array updates only, no drawing)."""
    import pyvista as pv

    from mbvi.render import FrameData, SceneView, animation_indices

    data = FrameData.from_trajectory(traj, animation_indices(traj.t, fps))
    plotter = pv.Plotter(off_screen=True, window_size=list(window_size))
    try:
        view = SceneView(plotter, data)
        start = time.perf_counter()
        for j in range(data.n_frames):
            view.show_frame(j)
        return (time.perf_counter() - start) / data.n_frames
    finally:
        plotter.close()


def pendulum_trajectory(t_end: float = 10.0) -> mbvi.Trajectory:
    """A particle pendulum released horizontally (the 301-frame GIF of the issue)."""
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.Particle("bob", mass=1.0, position=(1.0, 0.0, 0.0)))
    scene.add(mbvi.Rod("world", "bob"))
    return mbvi.simulate(scene, t_end=t_end, dt=1e-3)


def legacy_animate(traj: mbvi.Trajectory, path: Path, aa: str | None, fps: float = 30.0) -> None:
    """``animate`` as it was before: one process, corner-annotation time label, imageio's Pillow GIF writer."""
    import imageio.v3 as iio

    from mbvi.render import FrameData, SceneView, animation_indices
    from mbvi.render.api import _grab, _plotter

    data = FrameData.from_trajectory(traj, animation_indices(traj.t, fps))
    plotter = _plotter((640, 480), True, aa)
    try:
        view = SceneView(plotter, data, time_label=False)
        # the old time label: a corner annotation, re-fitted at every render
        corner = plotter.add_text("", position="upper_left", font_size=round(480 / 50))
        fmt = "t = {:.3f} s"
        with iio.imopen(path, "w", plugin="pillow") as writer:
            for j in range(data.n_frames):
                view.show_frame(j)
                corner.set_text("upper_left", fmt.format(data.times[j]))
                image = np.ascontiguousarray(_grab(plotter)[..., :3])
                writer.write(image, duration=1000.0 / fps, loop=0, is_batch=False)
    finally:
        plotter.close()


def workers_comparison(repeat: int, fmt: str, aa: str | None) -> None:
    """Frames/s of the old ``animate`` loop, of ``animate(workers=1)`` and of ``animate(workers=2)``."""
    traj = pendulum_trajectory()
    render = mbvi.render
    frames = len(render.animation_indices(traj.t, 30.0))
    runs = {
        "before (one process, median-cut GIF)": lambda p: legacy_animate(traj, p, aa),
        "workers=1": lambda p: render.animate(traj, p, workers=1, anti_aliasing=aa),
        "workers=2": lambda p: render.animate(traj, p, workers=2, anti_aliasing=aa),
    }
    if fmt != "gif":
        del runs["before (one process, median-cut GIF)"]
    results: dict[str, list[float]] = {k: [] for k in runs}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(repeat):
            for i, (label, run) in enumerate(runs.items()):
                start = time.perf_counter()
                run(Path(tmp) / f"p{i}.{fmt}")
                elapsed = time.perf_counter() - start
                results[label].append(frames / elapsed)
                print(f"run {r + 1}: {label}: {frames} frames in {elapsed:.2f} s ({frames / elapsed:.1f} frames/s)")
    med = {k: float(np.median(v)) for k, v in results.items()}
    for k, v in results.items():
        print(f"{k}: {med[k]:.1f} frames/s (min {min(v):.1f}, max {max(v):.1f}, {repeat} runs)")
    first = next(iter(med))
    for k in list(med)[1:]:
        print(f"ratio {k} / {first}: {med[k] / med[first]:.2f} (anti-aliasing: {aa}; {fmt}; 640x480)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--links", type=int, default=100)
    parser.add_argument("--frames", type=int, default=60)
    parser.add_argument("--format", choices=("mp4", "gif"), default=None, help="default: mp4 (gif with --workers)")
    parser.add_argument("--dt", type=float, default=5e-4)
    parser.add_argument("--aa", default="fxaa", help="anti-aliasing: fxaa (SSAA under EGL), ssaa, none")
    parser.add_argument("--workers", action="store_true", help="compare animate(workers=1) with workers=2")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    aa = None if args.aa.lower() == "none" else args.aa
    if args.workers:
        workers_comparison(args.repeat, args.format or "gif", aa)
        return
    args.format = args.format or "mp4"
    fps = 30.0
    window = (640, 480)
    t_end = (args.frames - 1) / fps

    start = time.perf_counter()
    traj = mbvi.simulate(chain_scene(args.links), t_end=t_end, dt=args.dt)
    sim = time.perf_counter() - start
    print(f"simulate {args.links}-link chain: {len(traj.t) - 1} steps in {sim:.2f} s (not part of the comparison)")

    render = mbvi.render  # first access: headless set-up and the PyVista import

    with tempfile.TemporaryDirectory() as tmp:
        # Warm up the EGL context and the encoder once so neither run pays for it.
        empty_baseline(2, window, Path(tmp) / f"warm.{args.format}", aa)
        base = empty_baseline(args.frames, window, Path(tmp) / f"empty.{args.format}", aa)
        start = time.perf_counter()
        render.animate(traj, Path(tmp) / f"chain.{args.format}", fps=fps, window_size=window, anti_aliasing=aa)
        chain = time.perf_counter() - start
    per_update = update_cost(traj, fps, window)

    n = args.frames
    print(f"empty scene : {n} frames {window[0]}x{window[1]} in {base:.2f} s ({1e3 * base / n:.1f} ms/frame)")
    print(
        f"{args.links}-link chain: {n} frames {window[0]}x{window[1]} in {chain:.2f} s ({1e3 * chain / n:.1f} ms/frame)"
    )
    print(f"ratio chain / empty: {chain / base:.2f}  (anti-aliasing: {args.aa}; {args.format})")
    print(f"moving the chain (SceneView.show_frame): {1e3 * per_update:.2f} ms/frame")


if __name__ == "__main__":
    main()
