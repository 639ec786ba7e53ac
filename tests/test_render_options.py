"""Rendering options: trails traced through the run (not the video's frames), cameras and styles that can draw
something, and option values that are refused with a ValueError naming them before anything is drawn."""

from __future__ import annotations

import numpy as np
import pytest

import mbvi

render = pytest.importorskip("mbvi.render")

from test_render import SMALL, pendulum_scene  # noqa: E402  (a 1 m pendulum from level: the bob runs on the unit circle)

from mbvi.render import api  # noqa: E402
from mbvi.render.frames import FrameData  # noqa: E402


@pytest.fixture(scope="module")
def pendulum() -> mbvi.Trajectory:
    return mbvi.simulate(pendulum_scene(), t_end=4.0, dt=1e-2)


class _Recorder(api.SceneView):
    """A SceneView that keeps the views it builds (to read the trails `animate` gives them)."""

    views: list[api.SceneView] = []

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        _Recorder.views.append(self)


# ---------------------------------------------------------------- trails
def test_an_animation_traces_the_trail_through_the_run_not_through_its_frames(pendulum, tmp_path, monkeypatch):
    """At 5 frames per second and 4 times real time (0.8 s of motion between frames) the trail ran through the
    frames' samples only: straight chords up to 0.78 m inside the 1 m circle the bob travels, and the camera was
    fitted to them. Every drawn trail segment now lies on the circle, and the trail ends at the bob."""
    monkeypatch.setattr(_Recorder, "views", [])
    monkeypatch.setattr(api, "SceneView", _Recorder)
    render.animate(pendulum, tmp_path / "run.gif", fps=5, speed=4.0, trail=True, workers=1, window_size=SMALL,
                   time_label=False)  # fmt: skip
    (view,) = _Recorder.views
    trails, data = view.trails, view.data
    assert trails is not None and trails.names == ["a"]
    assert data.n_frames == 6  # a coarse video: 0.8 s of motion between frames
    for j in range(data.n_frames):
        lo, hi = trails.window(j)
        shown = trails.points[lo : hi + 1, 0]
        np.testing.assert_allclose(shown[-1], data.particle_pos[j, 0], atol=1e-12)  # it ends at the bob
        assert trails.times[hi] == data.times[j]
        if j:
            midpoints = 0.5 * (shown[1:] + shown[:-1])
            sag = 1.0 - np.linalg.norm(midpoints, axis=1)
            assert sag.max() < 5e-3, f"frame {j}: the trail cuts {sag.max():.3f} m inside the bob's circle"
    # the whole run, every sample of it (401 < the budget), is in the last frame's trail
    assert trails.window(data.n_frames - 1) == (0, len(pendulum.t) - 1)


def test_a_trail_with_a_length_follows_the_run_too(pendulum, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(_Recorder, "views", [])
    monkeypatch.setattr(api, "SceneView", _Recorder)
    render.animate(pendulum, tmp_path / "run.gif", fps=5, speed=4.0, trail="a", trail_length=0.5, workers=1,
                   window_size=SMALL)  # fmt: skip
    (view,) = _Recorder.views
    lo, hi = view.trails.window(view.data.n_frames - 1)
    assert hi - lo == 50  # 0.5 s of the run's 0.01 s samples, not one chord from the frame before
    np.testing.assert_allclose(view.trails.times[[lo, hi]], (3.5, 4.0), atol=1e-9)


def test_trail_samples_are_capped_and_include_every_frame() -> None:
    frames = np.array([0, 7, 7, 12_345, 99_999])
    samples, upto = api._trail_samples(frames)
    assert len(samples) <= api._TRAIL_SAMPLES + len(frames)
    assert np.all(np.diff(samples) > 0) and samples[0] == 0 and samples[-1] == 99_999
    np.testing.assert_array_equal(samples[upto], frames)  # each frame's trail ends at its own sample
    assert np.max(np.diff(samples)) <= 51  # ~ every 50th of 100 000 samples: no long chords


@pytest.mark.parametrize("trail", [123, 1.5, [1, 2], b"a", {"a": 1}])
def test_a_trail_that_names_no_bodies_is_refused_naming_trail(trail, tmp_path) -> None:
    """``snapshot(scene, trail=123)`` was a TypeError: 'int' object is not iterable."""
    with pytest.raises(ValueError, match=r"snapshot\(\): trail must be True, False, None, a body's name"):
        render.snapshot(pendulum_scene(), None, trail=trail, window_size=SMALL)
    with pytest.raises(ValueError, match=r"animate\(\): trail must be"):
        render.animate(mbvi.Trajectory.from_scene(pendulum_scene()), tmp_path / "x.gif", trail=trail)
    assert not (tmp_path / "x.gif").exists()


def test_a_trail_given_as_any_iterable_of_names_is_drawn() -> None:
    scene = pendulum_scene()
    as_list = render.snapshot(scene, trail=["a"], window_size=SMALL).astype(int)
    as_generator = render.snapshot(scene, trail=(n for n in ["a"]), window_size=SMALL).astype(int)
    assert np.abs(as_list - as_generator).max() <= 2


# ---------------------------------------------------------------- cameras
@pytest.mark.parametrize(("camera", "why"), [
    ([(0, 0, 5), (0, 0, 0), (0, 0, 1)], "its view-up is parallel to its direction of view"),
    ([(0, 0, 5), (0, 0, 0), (0, 0, -2)], "its view-up is parallel to its direction of view"),
    ([(0, 0, 0), (0, 0, 0), (0, 1, 0)], "its position is its focal point"),
    ([(1e7, 0, 0), (1e7, 0, 0), (0, 0, 1)], "its position is its focal point"),
])  # fmt: skip
def test_a_camera_that_shows_nothing_is_refused_naming_camera(camera, why, tmp_path) -> None:
    """Both drew a blank picture without a word."""
    with pytest.raises(ValueError, match=rf"snapshot\(\): camera .* cannot show anything: {why}"):
        render.snapshot(pendulum_scene(), None, camera=camera, window_size=SMALL)
    with pytest.raises(ValueError, match=r"animate\(\): camera"):
        render.animate(mbvi.Trajectory.from_scene(pendulum_scene()), tmp_path / "x.gif", camera=camera)
    assert not (tmp_path / "x.gif").exists()


def test_scene_view_refuses_a_degenerate_camera_too() -> None:
    import pyvista as pv

    data = FrameData.from_trajectory(mbvi.Trajectory.from_scene(pendulum_scene()), [0])
    plotter = pv.Plotter(off_screen=True, window_size=list(SMALL))
    try:
        with pytest.raises(ValueError, match=r"SceneView\(\): camera .* view-up is parallel"):
            render.SceneView(plotter, data, camera=[(0, 0, 5), (0, 0, 0), (0, 0, 1)])
    finally:
        plotter.close()


def test_a_sound_camera_position_still_draws() -> None:
    image = render.snapshot(pendulum_scene(), None, camera=[(0, 0, 5), (0, 0, 0), (0, 1, 0)], window_size=SMALL)
    assert np.mean(image.min(axis=-1) < 240) > 0.005


# ---------------------------------------------------------------- styles
@pytest.mark.parametrize(("field", "value"), [
    ("rod", "grey50"), ("background", "#12"), ("text", None), ("grid", (1, 2)), ("joint", 5),
])  # fmt: skip
def test_a_style_colour_pyvista_cannot_read_is_refused_naming_the_field(field, value) -> None:
    """``Style(rod="grey50")`` was accepted and failed while drawing, in a worker process of animate, with a
    64-line traceback."""
    with pytest.raises(ValueError, match=rf"^Style\.{field}: .* is not a colour"):
        render.Style(**{field: value})


def test_a_style_colormap_that_does_not_exist_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^Style\.strain_cmap: 'no-such-map' is not a colormap"):
        render.Style(strain_cmap="no-such-map")


def test_style_accepts_what_pyvista_draws() -> None:
    style = render.Style(rod="grey", spring=(0.2, 0.4, 0.6), damper=[40, 40, 40], strain_cmap="viridis")
    assert style.rod == "grey"
    image = render.snapshot(pendulum_scene(), None, style=style, window_size=SMALL)
    assert np.mean(image.min(axis=-1) < 240) > 0.005


# ---------------------------------------------------------------- joints
def test_joints_false_hides_the_markers_and_keeps_the_bones() -> None:
    """As SceneView's docstring and docs/rendering.md now say (the docstring said the bones went too)."""
    import pyvista as pv

    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.RigidBody("ball", shape=mbvi.Sphere(0.1), density=500.0, position=(0.0, 0.0, -1.0)))
    scene.add(mbvi.Spherical("world", "ball", anchor=(0.0, 0.0, 0.0)))
    data = FrameData.from_trajectory(mbvi.Trajectory.from_scene(scene), [0])
    assert len(data.segments["bone"]) == 1 and len(data.joints) == 1
    counts = {}
    for joints in (True, False):
        plotter = pv.Plotter(off_screen=True, window_size=list(SMALL))
        try:
            render.SceneView(plotter, data, joints=joints)
            counts[joints] = len(plotter.renderer.actors)
        finally:
            plotter.close()
    assert counts[True] - counts[False] == 1  # the marker layer only
    assert "bones" in render.SceneView.__doc__ and "drawn either way" in render.SceneView.__doc__


# ---------------------------------------------------------------- torus
@pytest.mark.parametrize(("option", "value"), [("j", 5), ("i", -3), ("i", 1.0), ("j", True)])
def test_torus_refuses_a_coordinate_index_out_of_range_naming_it(option, value, tmp_path) -> None:
    """``torus(run, j=5)`` was an IndexError: index 5 is out of bounds for axis 1 with size 2."""
    import sympy as sp

    from mbvi.render.torus import torus

    a, b, da, db = sp.symbols("a b da db")
    system = mbvi.LagrangianSystem((da**2 + db**2) / 2 + sp.cos(a) + sp.cos(b), [a, b], [da, db],
                                   initial_state=([1.0, 0.5], [0.0, 0.0]))  # fmt: skip
    run = mbvi.simulate(system, t_end=0.1, dt=1e-2)
    with pytest.raises(ValueError, match=rf"torus\(\): {option} must be a coordinate's name or an index in -2 … 1"):
        torus(run, tmp_path / "t.png", **{option: value})
    assert not (tmp_path / "t.png").exists()
