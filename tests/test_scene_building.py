"""Building a scene: an element is in a scene once, a composite element that fails leaves the scene as it was, and
an axis is a direction whatever its size (found by a helper's review of the Scene API)."""

from __future__ import annotations

import numpy as np
import pytest

import mbvi


def _pendulum() -> mbvi.Scene:
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.RigidBody("b", mass=1.0, inertia=(0.01, 0.02, 0.02), position=(0.5, 0.0, 0.0)))
    return scene


@pytest.mark.parametrize("kind", ["spring", "revolute", "body"])
def test_one_element_added_twice_is_refused_and_the_scene_is_unchanged(kind: str) -> None:
    """A Spring added twice pulled twice as hard (and took the name spring:world-b#2); a Revolute added twice put
    its rows in twice and its name became 'world-b#2', so traj.joint_angle('world-b') was 'unknown'."""
    scene = _pendulum()
    element = {"spring": mbvi.Spring("world", "b", stiffness=10.0, rest_length=0.5),
               "revolute": mbvi.Revolute("world", "b", anchor=(0.0, 0.0, 0.0), axis=(0.0, 1.0, 0.0)),
               "body": scene.body("b")}[kind]  # fmt: skip
    if kind != "body":
        scene.add(element)
    name = element.name
    counts = (len(scene.bodies), len(scene.joints), len(scene.forces))
    with pytest.raises(ValueError, match=f"{type(element).__name__} '{name}' is already in the scene"):
        scene.add(element)
    assert element.name == name and (len(scene.bodies), len(scene.joints), len(scene.forces)) == counts
    if kind == "revolute":
        traj = mbvi.simulate(scene, 0.2, 1e-3)
        assert traj.joint_angle(name)[-1] > 0.01  # (read by its name: it swings down, about its one hinge)


def test_a_beam_that_fails_to_add_leaves_the_scene_as_it_was() -> None:
    """A beam whose second node's name was taken left its first node in the scene (simulated), and its name taken:
    the corrected beam was refused as a 'duplicate name'."""
    scene = mbvi.Scene()
    scene.add(mbvi.Particle("beam[1]", mass=1.0, position=(5.0, 0.0, 0.0)))
    beam = dict(start=(0, 0, 0), end=(1, 0, 0), segments=2, density=1.0, area=1.0, youngs_modulus=1.0)
    with pytest.raises(ValueError, match="duplicate body name 'beam\\[1\\]'"):
        scene.add(mbvi.Beam("beam", **beam))
    assert [b.name for b in scene.bodies] == ["beam[1]"] and not scene.beams and not scene.forces
    assert set(scene.graph.nodes) == {"world", "beam[1]"}
    scene.add(mbvi.Beam("rod", **beam))
    assert len(scene.bodies) == 4 and list(scene.beams) == ["rod"]


@pytest.mark.parametrize(("joint", "axis"), [("revolute", (1e200, 1e200, 0.0)), ("prismatic", (0.0, 3e154, 3e154)),
                                             ("revolute", (1e-300, 1e-300, 0.0))])  # fmt: skip
def test_an_axis_is_a_direction_whatever_its_size(joint: str, axis: tuple) -> None:
    """(1e200, 1e200, 0) became the zero axis (its norm overflowed) and the run ended in 'projection … nan'."""
    scene = _pendulum()
    cls = mbvi.Revolute if joint == "revolute" else mbvi.Prismatic
    element = cls("world", "b", anchor=(0.0, 0.0, 0.0), axis=axis)
    expected = np.asarray(axis, dtype=float) / np.max(np.abs(axis))
    np.testing.assert_allclose(element.axis, expected / np.linalg.norm(expected), rtol=1e-15)
    scene.add(element)
    assert np.isfinite(mbvi.simulate(scene, 0.05, 1e-3).q).all()


def test_the_graph_is_read_only_and_the_scene_changes_through_add() -> None:
    """A node removed through scene.graph was still simulated (assembly reads the scene's own record), and a body
    added to the graph was dropped: the graph is a read-only view of the scene."""
    import networkx as nx

    scene = _pendulum()
    scene.add(mbvi.Revolute("world", "b", anchor=(0.0, 0.0, 0.0), axis=(0.0, 1.0, 0.0)))
    assert set(scene.graph.nodes) == {"world", "b"} and scene.graph.number_of_edges() == 1
    with pytest.raises(nx.NetworkXError, match="Frozen graph"):
        scene.graph.remove_node("b")
    with pytest.raises(nx.NetworkXError, match="Frozen graph"):
        scene.graph.add_node("c")
    scene.add(mbvi.Particle("c", mass=1.0, position=(0.0, 0.0, -1.0)))
    assert set(scene.graph.nodes) == {"world", "b", "c"} and scene.graph.nodes["c"]["body"] is scene.body("c")


def test_a_copied_or_unpickled_scene_knows_its_own_elements() -> None:
    """The record of what is in a scene is rebuilt for a copy: its own elements are refused a second time, the
    original's are new to it, and it runs as the original does."""
    import copy
    import pickle

    scene = _pendulum()
    scene.add(mbvi.Revolute("world", "b", anchor=(0.0, 0.0, 0.0), axis=(0.0, 1.0, 0.0)))
    for other in (copy.deepcopy(scene), pickle.loads(pickle.dumps(scene))):
        with pytest.raises(ValueError, match="already in the scene"):
            other.add(other.joints[0])
        np.testing.assert_array_equal(mbvi.simulate(other, 0.1, 1e-3).q, mbvi.simulate(scene, 0.1, 1e-3).q)
    fresh = copy.deepcopy(scene)
    spring = mbvi.Spring("world", "b", stiffness=1.0, rest_length=0.5)
    scene.add(spring)
    fresh.add(spring)  # (another scene's element: new to this one)
