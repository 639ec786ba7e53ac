"""Image regression: every body of every frame is drawn whole, with and without a ground plane.

Each picture that :func:`mbvi.render.snapshot` or :func:`mbvi.render.animate` writes is compared with a
reference drawn by the same :class:`mbvi.render.SceneView` from the same camera, but with a clipping range
far wider than the scene (near plane at 1 % of the camera distance, far plane at 100 times it), so that
nothing in the reference can be cut by the camera. Rigid bodies have distinct palette colours: the pixels of
each hue are counted in both pictures and must agree (a body cut by the near or far plane loses pixels, a
body beyond it loses all of them). Beams are coloured by strain: there the pixels that differ from the
background are counted. The pictures must also agree pixel by pixel, up to the GIF palette.

The scenes are the ones of the issue that found the bug (the ground plane, drawn in every gallery picture,
hid it by stretching the clipping range): the rigid chain of ``scenes/rigid_chain.py``, a pendulum of three
boxes, and the cantilever of ``docs/beams.md``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from scene_loader import load_scene

import mbvi

render = pytest.importorskip("mbvi.render")
iio = pytest.importorskip("imageio.v3")

from matplotlib.colors import rgb_to_hsv  # noqa: E402

from mbvi.render.api import _grab, _plotter  # noqa: E402
from mbvi.render.frames import FrameData, animation_indices  # noqa: E402
from mbvi.render.style import palette_rgb  # noqa: E402

SIZE = (240, 180)


# ---------------------------------------------------------------- scenes
def rigid_chain() -> mbvi.Scene:
    """The six capsules of ``scenes/rigid_chain.py``, released horizontal (2.5 of them were drawn)."""
    return load_scene("rigid_chain").build()


def three_boxes() -> mbvi.Scene:
    """Three hinged boxes released horizontal (the third was lost)."""
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    parent = "world"
    for i in range(3):
        body = f"box{i}"
        scene.add(mbvi.RigidBody(body, shape=mbvi.Box((0.5, 0.1, 0.1)), density=500.0, position=(0.25 + 0.5 * i, 0, 0)))
        scene.add(mbvi.Revolute(parent, body, anchor=(0.5 * i, 0.0, 0.0), axis=(0.0, 1.0, 0.0)))
        parent = body
    return scene


def cantilever(stiff: bool = True) -> mbvi.Scene:
    """The steel cantilever of ``docs/beams.md`` (it ended in a cut face); ``stiff=False``: a floppy one that
    swings down under gravity in a few tenths of a second."""
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    if stiff:
        beam = mbvi.Beam(
            "beam", start=(0, 0, 0), end=(1, 0, 0), segments=20, density=7850.0, area=2e-4,
            youngs_modulus=2.1e11, second_moment=1.67e-9, clamp="start",
        )  # fmt: skip
    else:
        beam = mbvi.Beam(
            "beam", start=(0, 0, 0), end=(1, 0, 0), segments=10, density=1000.0, area=1e-4,
            youngs_modulus=1e7, second_moment=1e-11, clamp="start",
        )  # fmt: skip
    scene.add(beam)
    scene.add(mbvi.ExternalForce(beam.nodes[-1], force=(0.0, 0.0, -10.0 if stiff else -0.01)))
    return scene


# ---------------------------------------------------------------- pictures and how they are compared
def reference_frames(
    data: FrameData, opts: dict, window_size: Sequence[int] = SIZE, anti_aliasing: str | None = "ssaa"
) -> list[np.ndarray]:
    """Every frame of ``data`` drawn by a SceneView with a clipping range far wider than the scene."""
    plotter = _plotter(tuple(window_size), True, anti_aliasing)
    try:
        view = render.SceneView(plotter, data, **opts)
        frames = []
        for j in range(data.n_frames):
            view.show_frame(j)
            cam = plotter.camera
            dist = float(np.linalg.norm(np.subtract(cam.position, cam.focal_point)))
            cam.clipping_range = (0.01 * dist, 100.0 * dist)
            frames.append(_grab(plotter))
        return frames
    finally:
        plotter.close()


def hue_counts(image: np.ndarray, colours: np.ndarray, tol: float = 10.0) -> np.ndarray:
    """Number of pixels of each body colour's hue, shape (len(colours),).

    Shading scales a colour and specular light adds white to it; neither changes its hue. Pixels with
    little colour (the background, the ground, grey rods and joint markers) are not counted.
    """
    hsv = rgb_to_hsv(image[..., :3].reshape(-1, 3) / 255.0)
    coloured = hsv[(hsv[:, 1] > 0.25) & (hsv[:, 2] > 0.15)]
    body = rgb_to_hsv(np.asarray(colours, dtype=float) / 255.0)[:, 0]
    gap = np.abs(coloured[:, None, 0] - body[None, :]) * 360.0
    gap = np.minimum(gap, 360.0 - gap)
    nearest = np.argmin(gap, axis=1)
    close = gap[np.arange(len(gap)), nearest] < tol
    return np.bincount(nearest[close], minlength=len(body))


def foreground(image: np.ndarray) -> int:
    """Number of pixels that differ from the white background by more than 40 in a channel."""
    return int(np.sum((255 - image[..., :3].astype(int)).max(axis=-1) > 40))


def assert_bodies_whole(got: np.ndarray, ref: np.ndarray, names: list[str], what: str) -> None:
    """Every body of the reference is in ``got`` with (nearly) as many pixels."""
    colours = palette_rgb(len(names))
    n_ref, n_got = hue_counts(ref, colours), hue_counts(got, colours)
    assert np.all(n_ref > 40), (
        f"control: a body is hardly visible in the reference: {dict(zip(names, n_ref, strict=True))}"
    )
    lost = {n: f"{g} of {r} pixels" for n, g, r in zip(names, n_got, n_ref, strict=True) if abs(g - r) > 0.1 * r}
    assert not lost, f"{what}: bodies cut by the camera: {lost}"


def assert_same_picture(got: np.ndarray, ref: np.ndarray, what: str, share: float = 0.005) -> None:
    """At most ``share`` of the pixels differ by more than 60 in a channel."""
    differ = float(np.mean(np.abs(got[..., :3].astype(int) - ref[..., :3].astype(int)).max(axis=-1) > 60))
    assert differ <= share, f"{what}: {differ:.1%} of the pixels differ from the unclipped reference"


# ---------------------------------------------------------------- snapshots
@pytest.mark.parametrize("ground", [False, True])
@pytest.mark.parametrize("build", [rigid_chain, three_boxes])
def test_snapshot_draws_every_rigid_body_whole(build, ground: bool) -> None:
    scene = build()
    traj = mbvi.Trajectory.from_scene(scene)
    names = [b.name for b in FrameData.from_trajectory(traj, [0]).rigid]
    got = render.snapshot(scene, window_size=SIZE, ground=ground)
    (ref,) = reference_frames(FrameData.from_trajectory(traj, [0]), {"ground": ground})
    what = f"snapshot of {build.__name__} (ground={ground})"
    assert_bodies_whole(got, ref, names, what)
    assert_same_picture(got, ref, what)


@pytest.mark.parametrize("ground", [False, True])
def test_snapshot_draws_the_whole_beam(ground: bool) -> None:
    scene = cantilever()
    opts = {"ground": ground, "scalar_bar": False}
    got = render.snapshot(scene, window_size=SIZE, **opts)
    (ref,) = reference_frames(FrameData.from_trajectory(mbvi.Trajectory.from_scene(scene), [0]), opts)
    if not ground:
        n_ref, n_got = foreground(ref), foreground(got)
        assert n_ref > 300, "control: the beam is drawn in the reference"
        assert abs(n_got - n_ref) <= 0.05 * n_ref, f"beam: {n_got} of {n_ref} pixels drawn"
    assert_same_picture(got, ref, f"snapshot of the cantilever (ground={ground})")


# ---------------------------------------------------------------- animations
@pytest.fixture(scope="module")
def boxes_run() -> mbvi.Trajectory:
    return mbvi.simulate(three_boxes(), t_end=1.0, dt=1e-3)


@pytest.fixture(scope="module")
def beam_run() -> mbvi.Trajectory:
    return mbvi.simulate(cantilever(stiff=False), t_end=0.6, dt=1e-4)


@pytest.mark.parametrize("ground", [False, True])
def test_gif_frames_draw_every_rigid_body_whole(boxes_run, ground: bool, tmp_path) -> None:
    fps = 5.0
    opts = {"ground": ground, "time_label": False}
    path = render.animate(boxes_run, tmp_path / "boxes.gif", fps=fps, window_size=SIZE, workers=1, **opts)
    frames = iio.imread(path, index=None)
    data = FrameData.from_trajectory(boxes_run, animation_indices(boxes_run.t, fps))
    refs = reference_frames(data, opts, anti_aliasing="fxaa")
    assert len(frames) == len(refs) == 6
    names = [b.name for b in data.rigid]
    for j, (got, ref) in enumerate(zip(frames, refs, strict=True)):
        what = f"GIF frame {j} of the three boxes (ground={ground})"
        assert_bodies_whole(got, ref, names, what)
        assert_same_picture(got, ref, what, share=0.01)  # the GIF palette moves some colours a little


@pytest.mark.parametrize("ground", [False, True])
def test_gif_frames_draw_the_whole_beam(beam_run, ground: bool, tmp_path) -> None:
    fps = 5.0
    opts = {"ground": ground, "time_label": False, "scalar_bar": False}
    path = render.animate(beam_run, tmp_path / "beam.gif", fps=fps, window_size=SIZE, workers=1, **opts)
    frames = iio.imread(path, index=None)
    data = FrameData.from_trajectory(beam_run, animation_indices(beam_run.t, fps))
    refs = reference_frames(data, opts, anti_aliasing="fxaa")
    assert len(frames) == len(refs) == 4
    moved = np.linalg.norm(data.beams[0].nodes[-1, -1] - data.beams[0].nodes[0, -1])
    assert moved > 0.3, "control: the tip swings down"
    for j, (got, ref) in enumerate(zip(frames, refs, strict=True)):
        what = f"GIF frame {j} of the swinging beam (ground={ground})"
        if not ground:
            n_ref, n_got = foreground(ref), foreground(got)
            assert n_ref > 200, "control: the beam is drawn in the reference"
            assert abs(n_got - n_ref) <= 0.05 * n_ref, f"{what}: {n_got} of {n_ref} pixels drawn"
        assert_same_picture(got, ref, what, share=0.01)


def test_clipping_range_covers_every_frame(boxes_run) -> None:
    """What ``show()``'s slider relies on: after ``show_frame(j)`` the near and far planes enclose every actor
    at every frame j, and every body's bounding sphere at every frame."""
    data = FrameData.from_trajectory(boxes_run, animation_indices(boxes_run.t, 10.0))
    plotter = _plotter(SIZE, True, None)
    try:
        view = render.SceneView(plotter, data)
        cam = plotter.camera
        direction = np.subtract(cam.focal_point, cam.position)
        direction /= np.linalg.norm(direction)
        radius = 0.5 * np.linalg.norm((0.5, 0.1, 0.1))  # a box's bounding sphere
        for j in range(data.n_frames):
            view.show_frame(j)
            near, far = cam.clipping_range
            bounds = np.asarray(plotter.renderer.ComputeVisiblePropBounds()).reshape(3, 2)
            corners = np.array(np.meshgrid(*bounds)).reshape(3, -1).T
            depth = (corners - cam.position) @ direction
            assert near <= depth.min() and depth.max() <= far, f"frame {j}: actors at {depth} outside {near, far}"
            centres = (data.rigid_pos[j] - cam.position) @ direction
            assert near <= centres.min() - radius and centres.max() + radius <= far, f"frame {j}"
    finally:
        plotter.close()
