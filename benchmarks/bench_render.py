"""Rendering cost of a 100-link chain against an empty scene (headless).

Renders a 60-frame, 640×480 animation of a hanging 100-link chain (100
particles, 100 rods) and, in the same process, 60 frames of an empty scene
through the same plotter set-up and video writer. Prints wall-clock times
and their ratio; nothing is asserted. The per-frame cost of moving the
chain (``SceneView.show_frame``: in-place array updates) is reported apart
from the draw-and-read-back cost.

Run::

    python benchmarks/bench_render.py [--links 100] [--frames 60] [--format mp4]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--links", type=int, default=100)
    parser.add_argument("--frames", type=int, default=60)
    parser.add_argument("--format", choices=("mp4", "gif"), default="mp4")
    parser.add_argument("--dt", type=float, default=5e-4)
    parser.add_argument("--aa", default="fxaa", help="anti-aliasing: fxaa (SSAA under EGL), ssaa, none")
    args = parser.parse_args()
    aa = None if args.aa.lower() == "none" else args.aa
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
