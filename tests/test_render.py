"""Rendering: real headless images, videos with the right frames, in-place updates."""

from __future__ import annotations

import os
import subprocess
import sys

import imageio.v3 as iio
import numpy as np
import pytest

import mbvi

render = pytest.importorskip("mbvi.render")

from mbvi.render.frames import FrameData, animation_indices, nearest_indices  # noqa: E402
from mbvi.render.transforms import (  # noqa: E402
    instance_points,
    rotation_minimizing_frames,
    segment_frames,
    tube_faces,
    tube_points,
)

SMALL = (160, 120)


# ---------------------------------------------------------------- scenes
def pendulum_scene() -> mbvi.Scene:
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.Particle("a", mass=1.0, position=(1.0, 0.0, 0.0)))
    scene.add(mbvi.Rod("world", "a"))
    return scene


@pytest.fixture(scope="module")
def pendulum() -> mbvi.Trajectory:
    return mbvi.simulate(pendulum_scene(), t_end=1.0, dt=0.01)


def shapes_scene() -> mbvi.Scene:
    """One rigid body of every shape, a spring, a damper, a hinge, a particle."""
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    shapes = [
        mbvi.Sphere(0.15),
        mbvi.Box((0.3, 0.2, 0.1)),
        mbvi.Cylinder(0.1, 0.4),
        mbvi.Capsule(0.08, 0.3),
    ]
    for i, shape in enumerate(shapes):
        scene.add(mbvi.RigidBody(f"b{i}", shape=shape, density=500.0, position=(0.6 * i, 0.0, -1.0)))
    scene.add(mbvi.Revolute("world", "b0", anchor=(0.0, 0.0, -0.5), axis=(0, 1, 0)))
    scene.add(mbvi.Particle("p", mass=0.5, position=(2.4, 0.0, -1.0)))
    scene.add(mbvi.Spring("world", "b1", stiffness=20.0, anchor_a=(0.6, 0.0, 0.0)))
    scene.add(mbvi.Damper("b2", "p", damping=0.1))
    return scene


def foreground_fraction(image: np.ndarray, background: int = 255, tol: int = 12) -> float:
    """Fraction of pixels that differ from the (white) background."""
    diff = np.abs(image[..., :3].astype(int) - background).max(axis=-1)
    return float(np.mean(diff > tol))


# ---------------------------------------------------------------- headless
def test_headless_window_selected() -> None:
    if os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY") or not sys.platform.startswith("linux"):
        pytest.skip("a display is available")
    assert os.environ.get("VTK_DEFAULT_OPENGL_WINDOW") == "vtkEGLRenderWindow"


def test_import_mbvi_does_not_import_pyvista() -> None:
    code = (
        "import sys, mbvi; assert 'pyvista' not in sys.modules and 'vtk' not in sys.modules; "
        "mbvi.render; assert 'pyvista' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_show_refuses_without_display(pendulum: mbvi.Trajectory) -> None:
    if os.environ.get("VTK_DEFAULT_OPENGL_WINDOW") != "vtkEGLRenderWindow" or "ipykernel" in sys.modules:
        pytest.skip("not headless")
    with pytest.raises(RuntimeError, match="snapshot"):
        render.show(pendulum)


# ---------------------------------------------------------------- snapshot
def test_snapshot_of_scene_writes_a_real_png(tmp_path) -> None:
    path = tmp_path / "sub" / "scene.png"
    image = render.snapshot(pendulum_scene(), path, window_size=SMALL)
    assert image.shape == (SMALL[1], SMALL[0], 3)
    read = iio.imread(path)
    assert read.shape[:2] == (SMALL[1], SMALL[0])
    frac = foreground_fraction(read)
    assert 0.005 < frac < 0.5, frac  # something is drawn, but not a blank or a full-screen blob


def test_snapshot_frames_of_moving_pendulum_differ(pendulum: mbvi.Trajectory) -> None:
    first = render.snapshot(pendulum, frame=0, window_size=SMALL).astype(int)
    last = render.snapshot(pendulum, frame=-1, window_size=SMALL).astype(int)
    again = render.snapshot(pendulum, frame=-1, window_size=SMALL).astype(int)
    changed = np.mean(np.abs(first - last).max(axis=-1) > 30)
    assert changed > 0.003
    assert np.abs(last - again).max() <= 2  # deterministic


def test_snapshot_of_every_shape_and_link(tmp_path) -> None:
    scene = shapes_scene()
    image = render.snapshot(scene, tmp_path / "shapes.png", window_size=(200, 150), ground=True)
    assert 0.05 < foreground_fraction(image) < 0.95
    data = FrameData.from_trajectory(mbvi.Trajectory.from_scene(scene), [0])
    assert [b.shape["type"] for b in data.rigid] == ["sphere", "box", "cylinder", "capsule"]
    assert len(data.segments["spring"]) == 1 and len(data.segments["damper"]) == 1
    assert [j.kind for j in data.joints] == ["revolute"]
    np.testing.assert_allclose(data.segments["spring"].start[0, 0], (0.6, 0.0, 0.0))
    # World anchors: the spring's world point and the hinge's.
    assert len(data.world_anchors) == 2


def test_rigid_body_without_shape_is_drawn() -> None:
    scene = mbvi.Scene(gravity=None)
    scene.add(mbvi.RigidBody("r", mass=1.0, inertia=(0.1, 0.2, 0.25), angular_velocity=(0.0, 0.0, 1.0)))
    traj = mbvi.simulate(scene, t_end=0.1, dt=0.01)
    image = render.snapshot(traj, window_size=SMALL)
    assert 0.01 < foreground_fraction(image) < 0.9


def test_trail_draws_the_path(pendulum: mbvi.Trajectory) -> None:
    plain = render.snapshot(pendulum, window_size=SMALL, joints=False)
    traced = render.snapshot(pendulum, window_size=SMALL, joints=False, trail=True)
    assert foreground_fraction(traced) > foreground_fraction(plain) + 0.002


def test_loaded_trajectory_renders_like_the_original(pendulum: mbvi.Trajectory, tmp_path) -> None:
    pendulum.save(tmp_path / "run.npz")
    loaded = mbvi.Trajectory.load(tmp_path / "run.npz")
    assert loaded.scene is None
    a = render.snapshot(pendulum, window_size=SMALL).astype(int)
    b = render.snapshot(loaded, window_size=SMALL).astype(int)
    assert np.abs(a - b).max() <= 2


def test_unknown_option_and_bad_frame_are_rejected(pendulum: mbvi.Trajectory) -> None:
    with pytest.raises(TypeError, match="colour"):
        render.snapshot(pendulum, colour="red")
    with pytest.raises(IndexError, match="out of range"):
        render.snapshot(pendulum, frame=len(pendulum.t))


def _stretched_beam(factor: float) -> mbvi.Trajectory:
    """A one-frame beam trajectory whose nodes are scaled by ``factor`` (uniform strain factor − 1)."""
    scene = mbvi.Scene(gravity=None)
    scene.add(
        mbvi.Beam("beam", start=(0, 0, 0), end=(1, 0, 0), segments=10, density=1000.0, area=1e-4, youngs_modulus=1e7)
    )
    base = mbvi.Trajectory.from_scene(scene)
    q = base.q.copy() * factor  # particles only: every coordinate is a node position
    return mbvi.Trajectory(
        base.t,
        q,
        base.v,
        energy=base.energy,
        kinetic=base.kinetic,
        potential=base.potential,
        momentum=base.momentum,
        angular_momentum=base.angular_momentum,
        constraint_error=base.constraint_error,
        geometry=base.geometry,
    )


@pytest.mark.parametrize(("factor", "hue"), [(1.01, "red"), (0.99, "blue")])
def test_beam_is_coloured_by_strain(factor: float, hue: str) -> None:
    traj = _stretched_beam(factor)
    np.testing.assert_allclose(traj.strain("beam"), factor - 1.0, atol=1e-9)
    image = render.snapshot(traj, window_size=(200, 150), scalar_bar=False).astype(int)
    r, b = image[..., 0], image[..., 2]
    red = np.mean(r > b + 60)
    blue = np.mean(b > r + 60)
    assert max(red, blue) > 0.005
    assert (red > 5 * blue) if hue == "red" else (blue > 5 * red)


# ---------------------------------------------------------------- animation
def test_gif_has_the_expected_frames(pendulum: mbvi.Trajectory, tmp_path) -> None:
    path = render.animate(pendulum, tmp_path / "run.gif", fps=10, window_size=(96, 72))
    frames = iio.imread(path, index=None)
    assert frames.shape[0] == round(1.0 * 10) + 1
    assert frames.shape[1:3] == (72, 96)
    # The pendulum moves: first and middle frames differ.
    assert np.abs(frames[0].astype(int) - frames[5].astype(int)).max() > 50


def test_speed_changes_the_frame_count(pendulum: mbvi.Trajectory, tmp_path) -> None:
    path = render.animate(pendulum, tmp_path / "fast.gif", fps=10, speed=2.0, window_size=(64, 48))
    assert iio.imread(path, index=None).shape[0] == round(1.0 / 2.0 * 10) + 1


def test_mp4_decodes_with_the_expected_frames(pendulum: mbvi.Trajectory, tmp_path) -> None:
    imageio_ffmpeg = pytest.importorskip("imageio_ffmpeg")
    path = render.animate(pendulum, tmp_path / "run.mp4", fps=10, window_size=(97, 73))
    assert imageio_ffmpeg.count_frames_and_secs(str(path))[0] == 11
    # Decode every frame to raw RGB with the bundled ffmpeg (subprocess.run closes its pipes).
    cmd = [imageio_ffmpeg.get_ffmpeg_exe(), "-v", "error", "-i", str(path), "-f", "rawvideo", "-pix_fmt", "rgb24", "-"]
    raw = subprocess.run(cmd, capture_output=True, check=True, timeout=60).stdout
    w, h = 98, 74  # padded to even sizes for yuv420p
    assert len(raw) == 11 * w * h * 3
    frames = np.frombuffer(raw, dtype=np.uint8).reshape(11, h, w, 3)
    assert frames[0].std() > 1.0  # not a blank frame
    assert np.abs(frames[0].astype(int) - frames[5].astype(int)).max() > 50  # the pendulum moved


def test_animate_rejects_other_suffixes(pendulum: mbvi.Trajectory, tmp_path) -> None:
    with pytest.raises(ValueError, match=r"\.gif or \.mp4"):
        render.animate(pendulum, tmp_path / "run.avi")


def test_frames_move_actors_in_place(pendulum: mbvi.Trajectory) -> None:
    import pyvista as pv

    data = FrameData.from_trajectory(pendulum, animation_indices(pendulum.t, fps=5))
    plotter = pv.Plotter(off_screen=True, window_size=[64, 48])
    try:
        view = render.SceneView(plotter, data, trails=None)
        actors = dict(plotter.renderer.actors)
        meshes = [a.mapper.dataset for a in actors.values() if a.mapper is not None]
        before = [np.array(m.points) for m in meshes]
        view.show_frame(data.n_frames - 1)
        assert dict(plotter.renderer.actors) == actors  # nothing added or removed
        after = [a.mapper.dataset for a in actors.values() if a.mapper is not None]
        assert all(x is y for x, y in zip(meshes, after, strict=True))  # same meshes, updated in place
        moved = [not np.allclose(b, np.asarray(m.points)) for b, m in zip(before, meshes, strict=True)]
        assert any(moved)
    finally:
        plotter.close()


# ---------------------------------------------------------------- pure geometry
def test_animation_indices_follow_fps_and_speed() -> None:
    t = np.linspace(0.0, 2.0, 2001)
    idx = animation_indices(t, fps=30)
    assert len(idx) == 61
    np.testing.assert_allclose(t[idx], np.arange(61) / 30, atol=5e-4)
    assert len(animation_indices(t, fps=30, speed=4.0)) == 16
    assert len(animation_indices(t[:1], fps=30)) == 1
    with pytest.raises(ValueError):
        animation_indices(t, fps=0)
    np.testing.assert_array_equal(nearest_indices([0.0, 1.0, 2.0], [0.4, 0.6, 5.0, -1.0]), [0, 1, 2, 0])


def test_segment_frames_are_rotations_along_the_segment() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(50, 3)), rng.normal(size=(50, 3))
    b[0] = a[0] + (1.0, 0, 0)  # parallel to the helper axis
    b[1] = a[1]  # degenerate
    rot, length = segment_frames(a, b)
    np.testing.assert_allclose(rot @ np.swapaxes(rot, 1, 2), np.broadcast_to(np.eye(3), rot.shape), atol=1e-12)
    np.testing.assert_allclose(np.linalg.det(rot), 1.0)
    np.testing.assert_allclose(length, np.linalg.norm(b - a, axis=1))
    ok = length > 0
    np.testing.assert_allclose(rot[ok, :, 2] * length[ok, None], (b - a)[ok], atol=1e-12)


def test_instance_points_scale_rotate_translate() -> None:
    template = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
    rot, _ = segment_frames(np.zeros((1, 3)), np.array([[0.0, 2.0, 0.0]]))
    pts = instance_points(template, rot, np.array([[1.0, 1.0, 1.0]]), np.array([[1.0, 1.0, 2.0]]))
    np.testing.assert_allclose(pts[0], (1.0, 3.0, 1.0))  # the tip of a unit rod stretched to length 2


def test_tube_sweep_is_twist_free_and_round() -> None:
    s = np.linspace(0, 3 * np.pi, 60)
    path = np.column_stack([np.cos(s), np.sin(s), 0.2 * s])
    t, n, b = rotation_minimizing_frames(path)
    for frame in (t, n, b):
        np.testing.assert_allclose(np.linalg.norm(frame, axis=1), 1.0)
    np.testing.assert_allclose(np.sum(t * n, axis=1), 0.0, atol=1e-12)
    pts, normals = tube_points(path, 0.05, 8)
    dist = np.linalg.norm(pts.reshape(60, 8, 3) - path[:, None], axis=-1)
    np.testing.assert_allclose(dist, 0.05)
    assert tube_faces(60, 8).shape == (5 * 59 * 8,)
    assert normals.shape == pts.shape


# ---------------------------------------------------------------- documentation gallery
def _gallery():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "tools" / "gen_gallery.py"
    spec = importlib.util.spec_from_file_location("gen_gallery", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_gallery"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_gallery_marks_only_real_failures(tmp_path) -> None:
    """A scene without a comparison figure is not a failure; a scene that raised is."""
    gen = _gallery()
    entries = [
        gen.Entry("plain", "Plain", "", "gallery/plain.png", None, 0.1),
        gen.Entry("zoo", "Zoo", "", "gallery/zoo.png", None, 0.1, figure="gallery/zoo_figure.png"),
        gen.Entry("broken", "Broken", "", None, "ValueError: boom", 0.1),
    ]
    page = tmp_path / "gallery.md"
    gen.write_page(entries, tmp_path, page)
    text = page.read_text()
    sections = {s.split("\n", 1)[0]: s for s in text.split("\n## ")[1:]}
    assert "failed" not in sections["Plain"] and "![Plain](gallery/plain.png)" in sections["Plain"]
    assert "failed" not in sections["Zoo"] and "zoo_figure.png" in sections["Zoo"]
    assert "This scene failed to render: `ValueError: boom`" in sections["Broken"]
    assert "None" not in text


def test_gallery_renders_a_scene(tmp_path) -> None:
    gen = _gallery()
    assert gen.main(["--out", str(tmp_path), "--only", "pendulum", "--t-end", "0.2"]) == 0
    text = (tmp_path / "gallery.md").read_text()
    assert "failed" not in text and "![" in text
    assert (tmp_path / "gallery" / "pendulum.png").stat().st_size > 1000


# ---------------------------------------------------------------- joints drawn where physics has them
def _hinged_pair() -> mbvi.Scene:
    """Two bars released horizontal; the second hinge's axis lies along the first bar (world x)."""
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.RigidBody("l1", shape=mbvi.Box((1.0, 0.1, 0.1)), density=100.0, position=(0.5, 0.0, 0.0)))
    scene.add(mbvi.RigidBody("l2", shape=mbvi.Box((0.1, 0.1, 1.0)), density=100.0, position=(1.0, 0.0, -0.5)))
    scene.add(mbvi.Revolute("world", "l1", anchor=(0.0, 0.0, 0.0), axis=(0.0, 1.0, 0.0), name="shoulder"))
    scene.add(mbvi.Revolute("l1", "l2", anchor=(1.0, 0.0, 0.0), axis=(1.0, 0.0, 0.0), name="elbow"))
    return scene


def test_hinge_axis_is_drawn_from_the_body_frame_axis_at_a_non_assembly_start() -> None:
    """Issue 11: a trajectory starting at the equilibrium (l1 hanging down), not at the assembly pose
    (l1 horizontal), draws the elbow's axis along l1 — where physics has it — not along world x."""
    scene = _hinged_pair()
    eq = mbvi.equilibrium(scene)
    traj = mbvi.simulate(scene, t_end=0.02, dt=0.01, initial_state=eq.state)
    data = FrameData.from_trajectory(traj, [0, -1])
    (markers,) = [j for j in data.joints if j.kind == "revolute"]
    names = [link.name for link in traj.geometry.links if link.kind == "revolute"]
    elbow = names.index("elbow")
    link = traj.geometry.link("elbow")
    expected = np.einsum("fij,j->fi", traj.rotation("l1")[[0, -1]], np.asarray(link.axis_a))
    np.testing.assert_allclose(markers.axis[:, elbow], expected, atol=1e-9)
    # l1 hangs (nearly) down at equilibrium: the elbow axis follows l1, far from its assembly direction x.
    bar = traj.position("l1")[0] / np.linalg.norm(traj.position("l1")[0])
    assert abs(markers.axis[0, elbow] @ bar) > 1 - 1e-6
    assert abs(markers.axis[0, elbow] @ (1.0, 0.0, 0.0)) < 0.5
    # the axis physics uses: perpendicular to the hinge's two orientation rows at every frame
    (shoulder,) = [i for i, n in enumerate(names) if n == "shoulder"]
    np.testing.assert_allclose(markers.axis[:, shoulder], [[0.0, 1.0, 0.0]] * 2, atol=1e-9)


def test_assembly_writes_nothing_onto_the_joints() -> None:
    scene = _hinged_pair()
    before = {j.name: dict(vars(j)) for j in scene.joints}
    before_np = {n: {k: np.array(v, copy=True) for k, v in d.items()} for n, d in before.items()}
    mbvi.assemble(scene)
    mbvi.simulate(scene, t_end=0.01, dt=0.01)
    for j in scene.joints:
        assert set(vars(j)) == set(before[j.name]), f"assembly added {set(vars(j)) - set(before[j.name])}"
        for k, v in vars(j).items():
            np.testing.assert_array_equal(np.asarray(v), before_np[j.name][k])


def test_geometry_is_typed_and_round_trips(tmp_path) -> None:
    from mbvi.geometry import LinkGeometry, SceneGeometry

    traj = mbvi.simulate(_hinged_pair(), t_end=0.01, dt=0.01)
    assert isinstance(traj.geometry, SceneGeometry)
    assert isinstance(traj.geometry.link("elbow"), LinkGeometry)
    assert SceneGeometry.from_dict(traj.geometry.to_dict()) == traj.geometry
    traj.save(tmp_path / "run.npz")
    assert mbvi.Trajectory.load(tmp_path / "run.npz").geometry == traj.geometry


def test_trajectory_files_of_format_1_still_load(tmp_path) -> None:
    """The untyped geometry dict of older files (with its extra ``axis`` key) loads and renders."""
    import json

    traj = mbvi.simulate(_hinged_pair(), t_end=0.02, dt=0.01)
    old = traj.geometry.to_dict()
    for link in old["links"]:
        link["axis"] = link.get("axis_a")
        link.pop("length", None)
    meta = json.dumps({"geometry": old, "info": traj.info, "format": 1})
    arrays = {k: getattr(traj, k) for k in ("t", "q", "v", "energy", "kinetic", "potential")}
    arrays |= {k: getattr(traj, k) for k in ("momentum", "angular_momentum", "constraint_error")}
    np.savez_compressed(tmp_path / "old.npz", meta=np.array(meta), **arrays)
    back = mbvi.Trajectory.load(tmp_path / "old.npz")
    np.testing.assert_allclose(back.joint_angle("elbow"), traj.joint_angle("elbow"))
    assert FrameData.from_trajectory(back, [-1]).joints


# ---------------------------------------------------------------- camera
def _straight_chain(direction, links: int = 20) -> mbvi.Scene:
    d = np.asarray(direction, dtype=float) / np.linalg.norm(direction)
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    prev = "world"
    for i in range(1, links + 1):
        scene.add(mbvi.Particle(f"p{i}", mass=0.1, position=tuple(0.1 * i * d)))
        scene.add(mbvi.Rod(prev, f"p{i}"))
        prev = f"p{i}"
    return scene


@pytest.mark.parametrize("direction", [(1, 0, 0), (0, 1, 0), (1, 1, 0), (1, -0.3, 0), (1, 1, -0.5)])
def test_snapshot_of_a_straight_chain_sees_it_from_the_side(direction) -> None:
    """Issue 11: the default camera is far from the chain's axis (it was nearly end-on for diagonal chains)."""
    from mbvi.render.api import _plotter
    from mbvi.render.view import SceneView

    scene = _straight_chain(direction)
    data = FrameData.from_trajectory(mbvi.Trajectory.from_scene(scene), [0])
    plotter = _plotter(SMALL, True, False)
    try:
        SceneView(plotter, data)
        cam = plotter.camera
        view = np.asarray(cam.position) - np.asarray(cam.focal_point)
    finally:
        plotter.close()
    axis = np.asarray(direction, dtype=float) / np.linalg.norm(direction)
    angle = np.degrees(np.arccos(abs(view @ axis) / np.linalg.norm(view)))
    assert angle > 30.0, f"camera {angle:.1f}° from the chain's axis"
    image = render.snapshot(scene, window_size=SMALL)
    assert foreground_fraction(image) > 0.01


def _rigid_pendulum(tilt: float, axis=(0.0, 1.0, 0.0)) -> mbvi.Scene:
    """A 1 m cylinder on a hinge at the origin about the horizontal ``axis``, tilted ``tilt`` rad from hanging
    straight down, in the vertical plane normal to ``axis`` (the x–z plane for the default y axis)."""
    from scipy.spatial.transform import Rotation

    n = np.asarray(axis, dtype=float)
    turn = Rotation.from_rotvec(tilt * n)
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    centre = turn.apply([0.0, 0.0, -0.5])
    scene.add(mbvi.RigidBody("rod", shape=mbvi.Cylinder(0.05, 1.0), density=500.0, position=centre, orientation=turn))
    scene.add(mbvi.Revolute("world", "rod", anchor=(0.0, 0.0, 0.0), axis=tuple(n)))
    return scene


def _camera_direction(traj: mbvi.Trajectory, frames, **opts) -> np.ndarray:
    from mbvi.render.api import _plotter

    plotter = _plotter(SMALL, True, None)
    try:
        render.SceneView(plotter, FrameData.from_trajectory(traj, frames), **opts)
        view = np.subtract(plotter.camera.position, plotter.camera.focal_point)
    finally:
        plotter.close()
    return view / np.linalg.norm(view)


def _tilt_on_screen(image: np.ndarray) -> float:
    """Angle from the vertical of the main axis of the drawn pixels, degrees (a long thin body's tilt)."""
    rows, cols = np.nonzero((255 - image[..., :3].astype(int)).max(axis=-1) > 40)
    xy = np.stack([cols - cols.mean(), rows.mean() - rows], axis=1).astype(float)
    major = np.linalg.eigh(xy.T @ xy)[1][:, -1]
    return float(np.degrees(np.arctan2(abs(major[0]), abs(major[1]))))


@pytest.mark.parametrize(("tilt", "axis"), [(0.5, (0, 1, 0)), (-0.3, (0, 1, 0)), (0.5, (1, 0, 0)), (0.0, (0, 1, 0))])
def test_a_rigid_pendulum_is_seen_across_its_swing_plane(tilt, axis) -> None:
    """The review's case: a cylinder on a y-axis hinge tilted 0.5 rad in the x–z plane was seen nearly edge-on
    (the camera 21° from the swing plane; its bounding sphere spread the scene equally along x and y). The
    default view looks across the plane (64° from it: the 22° turn and 14° rise of the default view), like a
    particle pendulum's; hanging straight down, it looks along the hinge axis."""
    traj = mbvi.Trajectory.from_scene(_rigid_pendulum(tilt, axis))
    view = _camera_direction(traj, [0])
    to_plane = np.degrees(np.arcsin(abs(view @ np.asarray(axis, dtype=float))))
    assert to_plane > 60.0, f"the camera is {to_plane:.1f}° from the swing plane"


def test_a_rigid_pendulum_shows_its_true_tilt() -> None:
    """What the reader sees: the 0.5 rad (28.6°) tilt drawn as in the x–z view, not as 8–14°."""
    scene = _rigid_pendulum(0.5)
    face_on = _tilt_on_screen(render.snapshot(scene, window_size=(320, 240), camera="xz", joints=False))
    assert abs(face_on - 28.6) < 2.0, f"control: the x–z view shows {face_on:.1f}°"
    shown = _tilt_on_screen(render.snapshot(scene, window_size=(320, 240), joints=False))
    assert shown > face_on - 4.0, f"the default view shows the tilt as {shown:.1f}°, the x–z view {face_on:.1f}°"


def test_a_swinging_rigid_pendulum_is_animated_across_its_swing_plane() -> None:
    run = mbvi.simulate(_rigid_pendulum(0.5), t_end=1.0, dt=1e-2)
    assert np.ptp(run.position("rod")[:, 0]) > 0.3  # control: it swings
    for opts in ({}, {"ground": True}):
        view = _camera_direction(run, animation_indices(run.t, 10.0), **opts)
        assert np.degrees(np.arcsin(abs(view[1]))) > 60.0, opts


# ---------------------------------------------------------------- file formats and timing
@pytest.mark.parametrize(
    ("name", "magic"), [("s.png", b"\x89PNG\r\n\x1a\n"), ("s.jpg", b"\xff\xd8\xff"), ("s.JPEG", b"\xff\xd8\xff")]
)
def test_snapshot_writes_the_format_its_suffix_names(tmp_path, name: str, magic: bytes) -> None:
    image = render.snapshot(pendulum_scene(), tmp_path / name, window_size=SMALL)
    data = (tmp_path / name).read_bytes()
    assert data.startswith(magic), data[:8]
    back = iio.imread(tmp_path / name)
    assert back.shape[:2] == image.shape[:2]
    assert np.abs(back[..., :3].astype(int) - image.astype(int)).mean() < 3  # the picture, not something else


@pytest.mark.parametrize("name", ["s.tif", "s.gif", "s"])
def test_snapshot_refuses_other_suffixes_before_drawing(tmp_path, name: str, monkeypatch) -> None:
    def no_drawing(*args, **kwargs):
        raise AssertionError("drew a picture it cannot write")

    monkeypatch.setattr("mbvi.render.api._plotter", no_drawing)
    with pytest.raises(ValueError, match=r"\.png, \.jpg, \.jpeg"):
        render.snapshot(pendulum_scene(), tmp_path / name)
    assert not (tmp_path / name).exists()


def _gif_durations_ms(path) -> list[int]:
    from PIL import Image, ImageSequence

    with Image.open(path) as im:
        return [int(frame.info["duration"]) for frame in ImageSequence.Iterator(im)]


@pytest.mark.parametrize(("fps", "speed"), [(30.0, 1.0), (30.0, 2.0), (24.0, 0.5), (15.0, 1.0)])
def test_gif_plays_at_the_requested_speed(pendulum: mbvi.Trajectory, tmp_path, fps: float, speed: float) -> None:
    """Frame j of the GIF appears at j / fps (to the centisecond GIF stores), the last one when the simulated
    time span has passed at ``speed`` times real time (Pillow truncated 1000/30 ms to 3 cs: 10 % fast)."""
    path = render.animate(pendulum, tmp_path / "run.gif", fps=fps, speed=speed, window_size=(48, 36), workers=1)
    durations = np.asarray(_gif_durations_ms(path)) / 1000.0  # s
    frames = round((pendulum.t[-1] - pendulum.t[0]) / speed * fps) + 1
    assert len(durations) == frames
    assert np.all(np.abs(durations - 1.0 / fps) < 0.01 + 1e-9)  # each frame: 1/fps to the centisecond
    starts = np.concatenate([[0.0], np.cumsum(durations)])
    np.testing.assert_allclose(starts, np.arange(frames + 1) / fps, atol=0.005 + 1e-9)  # never drifts
    span = (pendulum.t[-1] - pendulum.t[0]) / speed
    assert abs(starts[-2] - span) <= 0.005 + 1e-9  # the last frame shows up when the run's time has passed


def test_gif_durations_alternate_without_drift() -> None:
    from mbvi.render.video import gif_durations

    assert gif_durations(6, 30.0) == [30, 40, 30, 30, 40, 30]
    assert gif_durations(3, 25.0) == [40, 40, 40]
    long = np.cumsum(gif_durations(3001, 30.0))
    assert long[-1] == 100_030 and long[2999] == 100_000  # 100 s of frames last 100 s, not 90


def test_gif_above_50_fps_warns(pendulum: mbvi.Trajectory, tmp_path) -> None:
    with pytest.warns(UserWarning, match="fps <= 50"):
        render.animate(pendulum.frame(0), tmp_path / "fast.gif", fps=60, window_size=(32, 24))


def test_mp4_plays_at_the_requested_speed(pendulum: mbvi.Trajectory, tmp_path) -> None:
    imageio_ffmpeg = pytest.importorskip("imageio_ffmpeg")
    path = render.animate(pendulum, tmp_path / "run.mp4", fps=30, speed=0.5, window_size=(48, 36))
    frames, seconds = imageio_ffmpeg.count_frames_and_secs(str(path))
    assert frames == 61
    assert abs(seconds - frames / 30.0) < 0.02


# ---------------------------------------------------------------- the torus of two angles
def _texts(plotter) -> dict[str, list[str]]:
    """The strings of every named text and point-label actor of ``plotter``."""
    out = {}
    for name, actor in plotter.renderer.actors.items():
        if hasattr(actor, "GetInput") and isinstance(actor.GetInput(), str):
            out[name] = [actor.GetInput()]
        elif hasattr(actor, "GetText"):  # a corner annotation (text placed "upper_left" and so on)
            out[name] = [t for k in range(8) if (t := actor.GetText(k))]
        elif name.endswith("-labels"):
            polydata = actor.GetMapper().GetInputAlgorithm().GetInputDataObject(0, 0)
            labels = polydata.GetPointData().GetAbstractArray("labels")
            out[name] = [labels.GetValue(k) for k in range(labels.GetNumberOfValues())]
    return out


@pytest.fixture(scope="module")
def angles_run() -> mbvi.Trajectory:
    from scene_loader import load_scene

    return mbvi.simulate(load_scene("double_pendulum_angles").build(), t_end=0.2, dt=1e-3, integrator="verlet")


def test_torus_names_its_axes_in_radians(angles_run: mbvi.Trajectory, tmp_path) -> None:
    from mbvi.render.torus import torus

    plotter = torus(angles_run)
    try:
        texts = _texts(plotter)
        assert texts["angle axes"] == ["around the ring: theta1 (rad)\naround the tube: theta2 (rad)"]
        assert texts["angle ticks-labels"] == [
            "theta1 = 0", "theta1 = pi/2", "theta1 = pi", "theta1 = 3pi/2",
            "theta2 = pi/2", "theta2 = pi", "theta2 = 3pi/2",
        ]  # fmt: skip
        assert list(plotter.scalar_bars.keys()) == ["time t (s)"]  # the colours of the trail
    finally:
        plotter.close()
    swapped = torus(angles_run, i="theta2", j=0)
    try:
        assert _texts(swapped)["angle axes"] == ["around the ring: theta2 (rad)\naround the tube: theta1 (rad)"]
    finally:
        swapped.close()
    path = tmp_path / "torus.png"
    torus(angles_run, path, window_size=(400, 300)).close()
    image = iio.imread(path)[..., :3]
    assert np.mean(image[:40, :200].min(axis=-1) < 128) > 0.01  # the caption is drawn in the upper left


def test_torus_writes_a_suffix_in_any_case_and_refuses_a_video_before_drawing(angles_run, tmp_path) -> None:
    """``.PNG`` wrote nothing (PyVista's screenshot knows lower-case suffixes only) after the whole run, where
    the rest of the renderer takes any case; a suffix it cannot write is refused before anything is drawn."""
    from mbvi.render.torus import torus

    magic = {"x.PNG": b"\x89PNG", "y.Jpg": b"\xff\xd8\xff"}
    for name, head in magic.items():
        torus(angles_run, tmp_path / name, window_size=(200, 150))
        assert (tmp_path / name).read_bytes()[: len(head)] == head
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(magic)  # under the names as given
    with pytest.raises(ValueError, match=r"torus: cannot write .*x\.gif.*\.png"):
        torus(angles_run, tmp_path / "x.gif")


# ---------------------------------------------------------------- runs without bodies (a LagrangianSystem's)
def _theta_system():
    import sympy as sp

    theta, omega = sp.symbols("theta omega")
    return mbvi.LagrangianSystem(
        sp.Rational(1, 2) * omega**2 + 9.81 * sp.cos(theta), coordinates=[theta], velocities=[omega]
    )


@pytest.fixture(scope="module")
def theta_run() -> mbvi.Trajectory:
    """The pendulum of the review: one angle, released at 1 rad; its trajectory has no bodies."""
    return mbvi.simulate(_theta_system(), t_end=1.0, dt=1e-2, initial_state=mbvi.State([1.0], [0.0]))


def _spy_phase_portraits(monkeypatch) -> list:
    """Record the figures :func:`mbvi.plot.phase_portrait` draws (the picture of a run without bodies)."""
    import mbvi.plot

    drawn = []
    original = mbvi.plot.phase_portrait

    def spy(*args, **kwargs):
        fig = original(*args, **kwargs)
        drawn.append((fig.axes[0].get_xlabel(), fig.axes[0].get_ylabel(), len(fig.axes[0].get_lines()[0].get_xdata())))
        return fig

    monkeypatch.setattr(mbvi.plot, "phase_portrait", spy)
    return drawn


@pytest.mark.parametrize("name", ["theta.png", "theta.jpg", "theta.jpeg"])
def test_snapshot_of_a_lagrangian_run_is_its_phase_portrait(theta_run, tmp_path, monkeypatch, name) -> None:
    """It was a white picture, written without a word; now the picture `mbvi run --render X.png` draws."""
    drawn = _spy_phase_portraits(monkeypatch)
    image = render.snapshot(theta_run, tmp_path / name, window_size=(400, 300))
    assert drawn == [("theta", "dtheta/dt", len(theta_run.t))]  # theta against its rate, every sample
    assert image.shape == (300, 400, 3)
    back = iio.imread(tmp_path / name)[..., :3]
    assert back.shape == (300, 400, 3)
    assert foreground_fraction(back) > 0.02  # axes, ticks, labels and the curve: not blank
    assert np.abs(back.astype(int) - image.astype(int)).mean() < 3


def test_snapshot_of_a_lagrangian_run_draws_the_samples_up_to_frame(theta_run, monkeypatch) -> None:
    drawn = _spy_phase_portraits(monkeypatch)
    render.snapshot(theta_run, frame=40, window_size=(200, 150))
    assert drawn == [("theta", "dtheta/dt", 41)]


def test_loaded_lagrangian_run_renders_its_phase_portrait_like_the_original(theta_run, tmp_path) -> None:
    theta_run.save(tmp_path / "h.npz")
    loaded = mbvi.Trajectory.load(tmp_path / "h.npz")
    a = render.snapshot(theta_run, window_size=SMALL).astype(int)
    b = render.snapshot(loaded, window_size=SMALL).astype(int)
    assert foreground_fraction(b) > 0.02
    assert np.abs(a - b).max() <= 2


def test_snapshot_of_a_from_scene_system_run_is_a_picture_not_blank(tmp_path, monkeypatch) -> None:
    """``LagrangianSystem.from_scene`` knows its bodies' kinematics, but its run's trajectory holds only the joint
    coordinates: it is drawn as a phase portrait too, named after the joint coordinate."""
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.Particle("a", mass=1.0, position=(1.0, 0.0, 0.0)))
    scene.add(mbvi.Rod("world", "a"))
    system = mbvi.LagrangianSystem.from_scene(scene)
    assert system.body_names == ["a"]  # control: the system has a body
    run = mbvi.simulate(system, t_end=0.5, dt=1e-2)
    drawn = _spy_phase_portraits(monkeypatch)
    image = render.snapshot(run, tmp_path / "a.png", window_size=SMALL)
    (coordinate,) = run.coordinate_names
    assert drawn == [(coordinate, f"d{coordinate}/dt", len(run.t))]
    assert foreground_fraction(image) > 0.02


def test_snapshot_of_two_free_angles_is_their_torus(angles_run) -> None:
    """Two free angles: the picture `mbvi run --render` draws, a trail on their torus (coloured, not blank)."""
    image = render.snapshot(angles_run, window_size=(400, 300))
    assert foreground_fraction(image) > 0.05


@pytest.mark.parametrize("name", ["x.gif", "x.mp4"])
def test_animating_a_lagrangian_run_is_refused_saying_what_to_use(theta_run, tmp_path, name) -> None:
    """Its frames held only the time label; now a ValueError, before any file is written."""
    with pytest.raises(ValueError, match=r"LagrangianSystem run .*no bodies to draw.*snapshot.*\.png.*phase_portrait"):
        render.animate(theta_run, tmp_path / name, fps=5, window_size=(48, 36))
    assert not (tmp_path / name).exists()


def test_show_of_a_lagrangian_run_is_refused_saying_what_to_use(theta_run) -> None:
    with pytest.raises(ValueError, match=r"no bodies to draw.*snapshot"):
        render.show(theta_run)


def test_render_command_draws_a_lagrangian_run_as_run_render_does(theta_run, tmp_path, capsys) -> None:
    """`mbvi render h.npz --out h.png` wrote a white picture; now the picture `mbvi run --render` writes."""
    from mbvi.cli import main
    from mbvi.lagrangian.picture import picture

    theta_run.save(tmp_path / "h.npz")
    for name in ("h.png", "h.jpg"):
        assert main(["render", str(tmp_path / "h.npz"), "--out", str(tmp_path / name), "--size", "320x240"]) == 0
        assert f"wrote {tmp_path / name}" in capsys.readouterr().out
    picture(theta_run, tmp_path / "run.png", window_size=(320, 240))  # what `mbvi run --render run.png` writes
    expected = iio.imread(tmp_path / "run.png")[..., :3].astype(int)
    assert foreground_fraction(expected) > 0.02
    assert np.abs(iio.imread(tmp_path / "h.png")[..., :3].astype(int) - expected).max() == 0
    assert np.abs(iio.imread(tmp_path / "h.jpg")[..., :3].astype(int) - expected).mean() < 3


@pytest.mark.parametrize("name", ["h.gif", "h.mp4"])
def test_render_command_refuses_to_animate_a_lagrangian_run(theta_run, tmp_path, capsys, name) -> None:
    from mbvi.cli import main

    theta_run.save(tmp_path / "h.npz")
    assert main(["render", str(tmp_path / "h.npz"), "--out", str(tmp_path / name)]) == 1
    captured = capsys.readouterr()
    assert "wrote" not in captured.out
    assert "LagrangianSystem run" in captured.err and "no bodies to animate" in captured.err
    assert ".png or .jpg" in captured.err
    assert not (tmp_path / name).exists()


# ---------------------------------------------------------------- frame and format checks
@pytest.mark.parametrize("frame", [1.5, 2.0, True, "3"])
def test_a_frame_that_is_not_an_integer_is_refused(pendulum: mbvi.Trajectory, frame, monkeypatch) -> None:
    def no_drawing(*args, **kwargs):
        raise AssertionError("drew a picture of a frame it should have refused")

    monkeypatch.setattr("mbvi.render.api._plotter", no_drawing)
    with pytest.raises(ValueError, match="frame must be an integer sample index"):
        render.snapshot(pendulum, frame=frame)


def test_numpy_integer_frames_are_accepted(pendulum: mbvi.Trajectory) -> None:
    a = render.snapshot(pendulum, frame=np.int64(3), window_size=SMALL).astype(int)
    b = render.snapshot(pendulum, frame=3, window_size=SMALL).astype(int)
    assert np.abs(a - b).max() <= 2


@pytest.mark.parametrize("name", ["x.jpg", "x.jpeg", "x.JPG"])
def test_render_command_writes_jpeg(pendulum: mbvi.Trajectory, tmp_path, capsys, name) -> None:
    """`mbvi render --out x.jpg` was refused ("use .gif, .mp4, .png") although snapshot writes JPEG."""
    from mbvi.cli import main

    pendulum.save(tmp_path / "run.npz")
    assert main(["render", str(tmp_path / "run.npz"), "--out", str(tmp_path / name), "--size", "160x120"]) == 0
    assert (tmp_path / name).read_bytes().startswith(b"\xff\xd8\xff")
    image = iio.imread(tmp_path / name)
    assert image.shape[:2] == (120, 160)
    assert foreground_fraction(image) > 0.005


# ---------------------------------------------------------------- options checked before drawing
@pytest.mark.parametrize(("options", "match"), [
    ({"anti_aliasing": "bogus"}, "anti_aliasing must be one of 'fxaa', 'ssaa', 'msaa' or None, got 'bogus'"),
    ({"anti_aliasing": True}, "anti_aliasing must be one of"),
    ({"camera": "top"}, "camera must be None, 'iso', 'xy', 'xz', 'yz' or a camera position"),
    ({"camera": [(1, 2)]}, "camera must be None"),
    ({"camera": [(1, 0, 0), (0, 0, 0), (0, 0, 0)]}, "camera must be None"),
    ({"style": "dark"}, "style must be an mbvi.render.Style or None, got 'dark'"),
    ({"quality": 0}, r"quality must be a number in 1 … 10"),
    ({"fps": 1e-3}, "fps must be a finite number of frames per second, at least 0.01, got 0.001"),
    ({"fps": "30"}, "fps must be a finite number"),
    ({"workers": "2"}, "workers must be a whole number of processes"),
    ({"workers": 0}, "workers must be a whole number of processes"),
])  # fmt: skip
def test_animation_options_are_checked_before_anything_is_drawn(pendulum, tmp_path, options, match) -> None:
    """They failed in worker processes, seconds later (a RuntimeError naming PyVista's aa_type), or as an
    AssertionError of imageio-ffmpeg (quality 0, which the docs allowed), an AttributeError, a TypeError, or an
    OverflowError after the whole run (fps 1e-3: a GIF delay is a 16-bit count of hundredths of a second)."""
    suffix = ".mp4" if "quality" in options else ".gif"
    with pytest.raises(ValueError, match=match):
        render.animate(pendulum, tmp_path / f"x{suffix}", window_size=SMALL, **options)
    assert not (tmp_path / f"x{suffix}").exists()


def test_pictures_refuse_a_bad_window_size_and_round_a_fractional_one(tmp_path) -> None:
    """torus() with window_size (-5, 10) had VTK allocate without bound and abort the interpreter
    (std::bad_alloc), and (100.5, 80) raised VTK's TypeError, through snapshot() of a LagrangianSystem's run too."""
    import sympy as sp

    from mbvi.render.torus import torus

    a, b = sp.symbols("a b")
    da, db = sp.symbols("da db")
    system = mbvi.LagrangianSystem(sp.Rational(1, 2) * (da**2 + db**2) + sp.cos(a) + sp.cos(b), [a, b], [da, db],
                                   initial_state=([0.5, 0.2], [1.0, 0.3]))  # fmt: skip
    run = mbvi.simulate(system, t_end=0.5, dt=0.01)
    with pytest.raises(ValueError, match=r"torus\(\): window_size must be two numbers of pixels"):
        torus(run, tmp_path / "t.png", window_size=(-5, 10))
    assert not (tmp_path / "t.png").exists()
    torus(run, tmp_path / "t.png", window_size=(100.5, 80))
    assert iio.imread(tmp_path / "t.png").shape[:2] == (80, 100)
    assert render.snapshot(run, window_size=(100.4, 80)).shape[:2] == (80, 100)


def test_empty_trajectories_are_refused_naming_the_call(pendulum, tmp_path) -> None:
    """head(0) gave IndexError: index -1 is out of bounds (animate), frame -1 out of range (snapshot)."""
    with pytest.raises(ValueError, match=r"animate\(\): the trajectory has no states to draw"):
        render.animate(pendulum.head(0), tmp_path / "x.gif", window_size=SMALL)
    with pytest.raises(ValueError, match=r"snapshot\(\): the trajectory has no states to draw"):
        render.snapshot(pendulum.head(0), window_size=SMALL)


def _marked_axes() -> mbvi.Scene:
    """A small ball at the origin, a big one at +y, and a weightless world."""
    scene = mbvi.Scene(gravity=None)
    scene.add(mbvi.RigidBody("o", shape=mbvi.Sphere(0.05), density=1000.0, position=(0.0, 0.0, 0.0)))
    scene.add(mbvi.RigidBody("y", shape=mbvi.Sphere(0.2), density=1000.0, position=(0.0, 1.0, 0.0)))
    scene.add(mbvi.RigidBody("z", shape=mbvi.Sphere(0.1), density=1000.0, position=(0.0, 0.0, 1.0)))
    return scene


def test_the_yz_view_puts_y_to_the_right_and_z_up() -> None:
    """camera="yz" looked from −x: +y was drawn to the left (a mirror image); "xy" and "xz" had their first axis
    to the right."""
    image = render.snapshot(_marked_axes(), window_size=(200, 200), camera="yz")
    mask = np.any(image[..., :3].astype(int) < 200, axis=-1)
    rows = np.nonzero(mask)[0]
    left_half, right_half = np.count_nonzero(mask[:, :100]), np.count_nonzero(mask[:, 100:])
    assert right_half > 2 * left_half  # the big ball at +y is on the right
    assert rows.min() < 60  # the ball at +z is at the top


def test_zoom_applies_to_a_camera_position_too() -> None:
    """With camera=[position, focus, up], zoom=3 gave the very picture of zoom=1."""
    camera = [(0.0, -6.0, 1.0), (0.0, 0.0, 0.5), (0.0, 0.0, 1.0)]
    near = render.snapshot(_marked_axes(), window_size=SMALL, camera=camera)
    far = render.snapshot(_marked_axes(), window_size=SMALL, camera=camera, zoom=3.0)
    assert foreground_fraction(far) > 4 * foreground_fraction(near)


def test_a_weightless_planar_motion_is_seen_face_on() -> None:
    """Without gravity the camera took +z for up and looked 14° above the plane of an x–y orbit: the drawn
    motion's height was a quarter of its width (a circle as a flat ellipse)."""
    scene = mbvi.Scene(gravity=None)
    scene.add(mbvi.Particle("a", mass=1.0, position=(1, 0, 0), velocity=(0, 1, 0)))
    scene.add(mbvi.Particle("b", mass=1.0, position=(-1, 0, 0), velocity=(0, -1, 0)))
    scene.add(mbvi.Rod("a", "b"))
    run = mbvi.simulate(scene, t_end=2 * np.pi, dt=1e-2)  # a whole turn: the trails are circles
    image = render.snapshot(run, window_size=(240, 240), trail=True)
    rows, cols = np.nonzero(np.any(image[..., :3].astype(int) < 200, axis=-1))
    assert 0.75 < (np.ptp(rows) + 1) / (np.ptp(cols) + 1) < 1.35
