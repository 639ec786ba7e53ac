"""Bodies stay visible and keep their shape whatever the size of the scene, its motion, or its place.

* A particle that travels far is drawn for the whole picture the camera frames: a ball thrown 80 m (and two
  particles flying 1 km apart) were drawn with the 0.06 m radius of their start, 0–2 pixels per frame.
* A lone rigid body fills the picture alike at any size: the camera's margin came from the scene's 1 m
  fallback length scale, so a 1 mm cube was 4 pixels of 320×240 and the gallery's Dzhanibekov box 7 %.
* Far from the world's origin bodies keep their shape: meshes were world coordinates cast to single
  precision, so two 1 m cubes at 1e7 m drew one flat slab; a run that blew up (1.8e79 m) overflowed into a
  blank picture, where it is now refused with a ValueError naming the body.
* Linked scenes — chains, pendulums — keep the sizes they had (their motion spans at most four times their
  bodies' spread).
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest
from scene_loader import load_scene

import mbvi

render = pytest.importorskip("mbvi.render")

from mbvi.render.api import _grab, _plotter  # noqa: E402
from mbvi.render.frames import FrameData, SegmentSet  # noqa: E402
from mbvi.render.style import Sizes  # noqa: E402
from mbvi.render.view import SceneView  # noqa: E402

SIZE = (240, 180)


def foreground(image: np.ndarray) -> np.ndarray:
    """Pixels that differ from the white background, shape (h, w) of bool."""
    return np.any(np.abs(image[..., :3].astype(int) - 255) > 8, axis=-1)


def frames_of(data: FrameData, window_size=SIZE, **opts) -> list[np.ndarray]:
    """Every frame of ``data`` as a SceneView draws it (no video encoding)."""
    plotter = _plotter(window_size, True, None)
    try:
        view = SceneView(plotter, data, **opts)
        out = []
        for j in range(data.n_frames):
            view.show_frame(j)
            out.append(_grab(plotter))
        return out
    finally:
        plotter.close()


def projectile() -> mbvi.Trajectory:
    """A ball thrown at (20, 0, 20) m/s: 80 m downrange in 4 s."""
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.Particle("ball", mass=0.5, position=(0, 0, 0), velocity=(20, 0, 20)))
    return mbvi.simulate(scene, t_end=4.0, dt=1e-2)


# ---------------------------------------------------------------- particles that travel far
def test_a_ball_thrown_far_is_drawn_in_every_frame() -> None:
    traj = projectile()
    data = FrameData.from_trajectory(traj, np.linspace(0, len(traj.t) - 1, 4).round().astype(int))
    counts = [int(foreground(image).sum()) for image in frames_of(data)]
    assert min(counts) >= 200, counts  # a ball over 16 px across (it was 0–2 pixels)


def test_a_ball_at_the_end_of_its_trail_is_drawn() -> None:
    """``snapshot(trail=True)``: the arc and the ball at its end (only the arc was drawn)."""
    traj = projectile()
    data = FrameData.from_trajectory(traj, [-1])
    trails = render.view.TrailSpec(["ball"], traj.position("ball")[:, None, :], traj.t, np.array([len(traj.t) - 1]))
    plotter = _plotter(SIZE, True, None)
    try:
        SceneView(plotter, data, trails=trails)
        image = _grab(plotter)
        renderer = plotter.renderer
        renderer.SetWorldPoint(*traj.position("ball")[-1], 1.0)
        renderer.WorldToDisplay()
        x, y, _ = renderer.GetDisplayPoint()
    finally:
        plotter.close()
    col, row = round(x), SIZE[1] - 1 - round(y)
    around = foreground(image)[row - 7 : row + 8, col - 7 : col + 8]
    assert around.sum() >= 180, around.sum()  # a ball fills the 15×15 pixels around the end; a 3 px line does not


def test_two_particles_flying_a_kilometre_apart_stay_visible() -> None:
    scene = mbvi.Scene(gravity=None)
    scene.add(mbvi.Particle("a", mass=1.0, position=(0, 0, 0), velocity=(-250, 0, 0)))
    scene.add(mbvi.Particle("b", mass=1.0, position=(1, 0, 0), velocity=(250, 0, 0)))
    traj = mbvi.simulate(scene, t_end=2.0, dt=0.05)
    data = FrameData.from_trajectory(traj, [0, 20, 40])
    counts = [int(foreground(image).sum()) for image in frames_of(data)]
    assert min(counts) >= 200, counts  # two balls (0–1 pixels before)


def test_linked_scenes_keep_the_sizes_of_their_spread() -> None:
    """A double pendulum's motion spans four times its bodies' spread: its spheres stay as its spread sizes them,
    at every frame and with its trails, as in the gallery."""
    traj = mbvi.simulate(load_scene("double_pendulum").build(), t_end=2.0, dt=1e-3)
    first = Sizes.for_frames(FrameData.from_trajectory(traj, [0])).unit
    data = FrameData.from_trajectory(traj, np.arange(0, len(traj.t), 50))
    extent = float(np.max(np.ptp(data.all_points(), axis=0)))
    assert extent > 3.5 * data.length_scale  # the motion does span about four times the spread
    assert Sizes.for_frames(data).unit == pytest.approx(first, rel=1e-12)
    assert Sizes.for_frames(data, extent=extent).unit == pytest.approx(0.06 * data.length_scale, rel=1e-12)


# ---------------------------------------------------------------- a lone rigid body of any size
def lone_cube(edge: float) -> mbvi.Scene:
    scene = mbvi.Scene(gravity=None)
    scene.add(mbvi.RigidBody("b", mass=1.0, inertia=(edge**2 / 6,) * 3, angular_velocity=(0, 0, 1)))
    return scene


def test_a_lone_rigid_body_fills_the_picture_alike_at_any_size() -> None:
    counts = {edge: int(foreground(render.snapshot(lone_cube(edge), None, window_size=SIZE)).sum())
              for edge in (1e-3, 1.0, 1e3)}  # fmt: skip
    assert counts[1.0] > 0.2 * SIZE[0] * SIZE[1]
    for edge in (1e-3, 1e3):
        assert counts[edge] == pytest.approx(counts[1.0], rel=0.02), counts  # the 1 mm cube was 4 pixels of 320×240


def test_the_dzhanibekov_box_fills_its_picture() -> None:
    image = render.snapshot(load_scene("dzhanibekov").build(), None, window_size=SIZE)
    _, cols = np.nonzero(foreground(image))
    assert cols.max() - cols.min() > 0.5 * SIZE[0]  # it spanned a third of the width (7 % of the pixels)


# ---------------------------------------------------------------- far from the world's origin
def two_cubes(edge: float, offset: float) -> mbvi.Scene:
    scene = mbvi.Scene(gravity=None)
    for name, x in (("b", 0.0), ("c", 3.0 * edge)):
        scene.add(mbvi.RigidBody(name, mass=1.0, inertia=(edge**2 / 6,) * 3, position=(offset + x, offset, 0.0)))
    return scene


@pytest.mark.parametrize(("edge", "offset"), [(1.0, 1e7), (0.01, 1e5)])
def test_rigid_bodies_far_from_the_origin_keep_their_shape(edge: float, offset: float) -> None:
    """At 1e7 m one 1 m cube vanished and the other was a flat slab; 1 cm cubes at 1e5 m were misshapen."""
    near = render.snapshot(two_cubes(edge, 0.0), None, window_size=SIZE)
    far = render.snapshot(two_cubes(edge, offset), None, window_size=SIZE)
    assert np.count_nonzero(np.abs(near.astype(int) - far.astype(int)).max(axis=-1) > 24) <= 10


def shifted(data: FrameData, offset: np.ndarray) -> FrameData:
    """``data`` with every drawn point moved by ``offset``, m."""
    segments = {k: SegmentSet(s.names, s.start + offset, s.end + offset) for k, s in data.segments.items()}
    return dataclasses.replace(
        data,
        particle_pos=data.particle_pos + offset,
        rigid_pos=data.rigid_pos + offset,
        segments=segments,
        joints=[dataclasses.replace(m, position=m.position + offset) for m in data.joints],
        beams=[dataclasses.replace(b, nodes=b.nodes + offset) for b in data.beams],
        world_anchors=data.world_anchors + offset,
        _positions={},
    )


def test_every_kind_of_element_far_from_the_origin_is_drawn_as_near_it() -> None:
    """Spheres, rods, springs, dampers, joints, anchors, a beam's tube, trails and the ground, moved 1e7 m."""
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.Particle("a", mass=1.0, position=(1, 0, 0)))
    scene.add(mbvi.Particle("b", mass=1.0, position=(2, 0, 0)))
    scene.add(mbvi.Rod("world", "a"))
    scene.add(mbvi.Spring("a", "b", stiffness=50.0))
    scene.add(mbvi.Damper("a", "b", damping=0.5))
    scene.add(mbvi.RigidBody("box", shape=mbvi.Box((0.4, 0.2, 0.1)), density=500.0, position=(0.2, 0.0, -0.5)))
    scene.add(mbvi.Revolute("world", "box", anchor=(0.0, 0.0, -0.5), axis=(0, 1, 0)))
    scene.add(mbvi.Beam("beam", start=(0, 1, 0), end=(1, 1, 0), segments=6, density=1000.0, area=1e-4,
                        youngs_modulus=1e7, clamp="start"))  # fmt: skip
    traj = mbvi.simulate(scene, t_end=0.3, dt=1e-3)
    data = FrameData.from_trajectory(traj, [0, 150, 300])
    offset = np.array([1e7, -1e7, 1e7])
    idx = np.arange(0, 301, 10)
    pts = np.stack([traj.position(n)[idx] for n in ("a", "b")], axis=1)
    trails = render.view.TrailSpec(["a", "b"], pts, traj.t[idx], np.array([0, 15, 30]))
    far_trails = render.view.TrailSpec(["a", "b"], pts + offset, traj.t[idx], trails.upto)
    opts = {"ground": True, "scalar_bar": False, "time_label": False}
    near = frames_of(data, trails=trails, **opts)
    far = frames_of(shifted(data, offset), trails=far_trails, **opts)
    for a, b in zip(near, far, strict=True):
        assert np.count_nonzero(np.abs(a.astype(int) - b.astype(int)).max(axis=-1) > 24) <= 20


# ---------------------------------------------------------------- runs that blew up
@pytest.fixture(scope="module")
def blown_up() -> mbvi.Trajectory:
    """Explicit Euler on a stiff spring: 1.8e79 m after 5 s (the picture was blank, with a NumPy warning)."""
    scene = mbvi.Scene(gravity=None)
    scene.add(mbvi.Particle("a", mass=1.0, position=(0, 0, 0)))
    scene.add(mbvi.Particle("b", mass=1.0, position=(1, 0, 0), velocity=(0, 0.1, 0)))
    scene.add(mbvi.Spring("a", "b", stiffness=1e4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the run's own warnings: it blew up
        traj = mbvi.simulate(scene, t_end=5.0, dt=0.05, integrator="explicit_euler")
    assert np.abs(traj.q).max() > 1e70
    return traj


def test_a_blown_up_frame_is_refused_naming_the_body(blown_up: mbvi.Trajectory, tmp_path) -> None:
    with pytest.raises(ValueError, match=r"cannot draw the particle '[ab]' at t = 5 s, sample 100: it is .* from the "
                       r"centre of the picture.*blew up"):  # fmt: skip
        render.snapshot(blown_up, None, window_size=SIZE)
    with pytest.raises(ValueError, match=r"blew up"):
        render.animate(blown_up, tmp_path / "run.gif", window_size=SIZE, fps=2, workers=2)  # before any worker
    assert not (tmp_path / "run.gif").exists()
    assert foreground(render.snapshot(blown_up, None, window_size=SIZE, frame=3)).sum() > 100  # before: fine


def test_positions_that_are_not_finite_are_refused_naming_the_body_and_time() -> None:
    traj = projectile()
    data = FrameData.from_trajectory(traj, [0, 100, 200, 300])
    data.particle_pos[2:] = np.nan
    plotter = _plotter(SIZE, True, None)
    try:
        with pytest.raises(ValueError, match=r"particle 'ball' at t = 2 s, sample 200: it is not finite"):
            SceneView(plotter, data)
    finally:
        plotter.close()


def test_a_spring_scene_draws_alike_at_any_size() -> None:
    """The coil was built 1 m long and stretched to the spring's length, its wire with it: at 20 m the spring was
    a solid column through its anchor (twice the foreground pixels of the 1-m scene), at 100 m a pillar taller
    than the picture."""

    def spring_scene(scale: float) -> mbvi.Scene:
        scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
        scene.add(mbvi.Particle("s", mass=1.0, position=(0.0, 0.0, -scale)))
        scene.add(mbvi.Particle("p", mass=1.0, position=(scale, 0.0, -scale)))
        scene.add(mbvi.Spring("world", "s", stiffness=50.0))
        scene.add(mbvi.Rod("s", "p"))
        return scene

    pictures = [foreground(render.snapshot(spring_scene(s), window_size=SIZE)) for s in (1.0, 20.0, 100.0)]
    for other in pictures[1:]:
        assert np.mean(pictures[0] != other) < 0.01, np.mean(pictures[0] != other)
    assert 0.01 < pictures[0].mean() < 0.1
