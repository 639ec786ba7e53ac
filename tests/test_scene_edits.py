"""A scene edited after its elements were added: what an assembled System holds, and edits that bypass the checks.

An element's attributes are checked when set; these are the edits that went around it (a name or a joint's body
changed after ``add``, an array edited in place, the forces list appended to) and a System assembled before an
edit, which every integrator must run alike.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

import mbvi
from mbvi.cli import main


def _pushed(rigid: bool) -> tuple[mbvi.Scene, mbvi.ExternalForce]:
    scene = mbvi.Scene(gravity=None)
    if rigid:  # pushed off its centre: the anchor it was assembled with turns it
        scene.add(mbvi.RigidBody("a", mass=1.0, inertia=(1.0, 1.0, 1.0)))
        return scene, scene.add(mbvi.ExternalForce("a", force=(1.0, 0.0, 0.0), anchor=(0.0, 1.0, 0.0)))
    scene.add(mbvi.Particle("a", mass=1.0, position=(0.0, 0.0, 0.0)))
    return scene, scene.add(mbvi.ExternalForce("a", force=(1.0, 0.0, 0.0)))


@pytest.mark.parametrize("integrator", ["verlet", "midpoint", "csm", "explicit_euler", "yoshida4"])
@pytest.mark.parametrize("edit", ["constant", "to a function", "anchor"])
def test_a_system_assembled_before_an_edit_runs_the_loads_it_was_assembled_with(edit: str, integrator: str) -> None:
    """``f.force = (5, 0, 0)`` after ``assemble``: the compiled loop read the element again (x(1) = 2.5, 5 N) while
    ``csm``, ``explicit_euler`` and ``System.force`` kept 1 N (x(1) = 0.5): one System, two physics."""
    scene, f = _pushed(rigid=edit == "anchor")
    system = mbvi.assemble(scene)
    if edit == "constant":
        f.force = (5.0, 0.0, 0.0)
    elif edit == "to a function":
        f.force = lambda t: (5.0, 0.0, 0.0)
    else:
        f.anchor = (0.0, 0.0, 1.0)
    traj = mbvi.simulate(system, 1.0, 1e-3, integrator=integrator)
    assert traj.position("a")[-1, 0] == pytest.approx(0.5, rel=2e-3)  # F t² / 2m with the assembled 1 N
    s = system.initial_state()
    np.testing.assert_array_equal(system.force(s.q, s.v, 0.0), mbvi.assemble(_pushed(edit == "anchor")[0]).force(
        s.q, s.v, 0.0))  # fmt: skip
    unedited = mbvi.simulate(_pushed(rigid=edit == "anchor")[0], 1.0, 1e-3, integrator=integrator)
    np.testing.assert_allclose(traj.q, unedited.q, rtol=0, atol=1e-12)
    if edit == "anchor":  # τ = r × F = (0, 1, 0) × (1, 0, 0): about −z, none about x
        w = traj.angular_velocity("a")[-1]
        assert w[2] < -0.9 and abs(w[0]) < 1e-9


def test_a_body_renamed_after_it_was_added_is_named_not_a_key_error() -> None:
    scene = mbvi.Scene()
    bob = scene.add(mbvi.Particle("a", mass=1.0, position=(1.0, 0.0, 0.0)))
    scene.add(mbvi.Rod("world", "a"))
    bob.name = "bob"
    with pytest.raises(ValueError, match=r"Particle 'bob': renamed after it was added to the scene as 'a'"):
        mbvi.simulate(scene, 0.1, 1e-3)


def test_a_joint_renamed_or_rejoined_after_it_was_added_is_named() -> None:
    """Renamed to "hinge", a second joint "hinge" was taken beside it and assembly blamed the initial positions
    (residual 3.5); a joint's body changed to one not in the scene was a bare KeyError."""
    scene = mbvi.Scene()
    scene.add(mbvi.Particle("p1", mass=1.0, position=(1.0, 0.0, 0.0)))
    scene.add(mbvi.Particle("p2", mass=1.0, position=(2.0, 0.0, 0.0)))
    first = scene.add(mbvi.Rod("world", "p1"))
    second = scene.add(mbvi.Rod("p1", "p2"))
    first.name = "hinge"
    with pytest.raises(ValueError, match=r"Rod 'hinge': renamed after it was added to the scene as 'world-p1'"):
        mbvi.assemble(scene)
    first.name = "world-p1"
    mbvi.assemble(scene)  # as it was added: fine again
    second.b = "nobody"
    with pytest.raises(ValueError, match=r"Rod 'p1-p2': its bodies were changed after it was added.*'nobody'"):
        mbvi.assemble(scene)


def test_a_force_renamed_to_a_taken_name_is_named() -> None:
    scene = mbvi.Scene()
    scene.add(mbvi.Particle("p", mass=1.0, position=(1.0, 0.0, 0.0)))
    scene.add(mbvi.Spring("world", "p", stiffness=1.0, name="k"))
    other = scene.add(mbvi.Spring("world", "p", stiffness=1.0, name="k2"))
    other.name = "k"
    with pytest.raises(ValueError, match=r"Spring 'k': its name was changed after it was added"):
        mbvi.assemble(scene)


def test_the_forces_list_is_read_only_and_live() -> None:
    """``scene.forces += [spring, spring]`` was taken: the spring acted twice (x(1) = 0.578, k = 2, where k = 1
    gives 0.770), a force on an unknown body failed at simulate as a bare KeyError."""
    scene = mbvi.Scene(gravity=None)
    scene.add(mbvi.Particle("p", mass=1.0, position=(1.0, 0.0, 0.0)))
    forces = scene.forces
    spring = mbvi.Spring("world", "p", stiffness=1.0, rest_length=0.0, name="k")
    for edit in (lambda: forces.append(spring), lambda: forces.extend([spring]), lambda: forces.remove(spring)):
        with pytest.raises(ValueError, match=r"scene.forces is read-only: add a force with scene.add"):
            edit()
    with pytest.raises(ValueError, match="read-only"):
        scene.forces += [spring, spring]
    assert len(scene.forces) == 0 and scene.forces == []
    scene.add(spring)
    assert forces == [spring] and scene.forces is forces and list(forces) == [spring]  # live, the scene's own
    x = mbvi.simulate(scene, 1.0, 1e-3).position("p")[-1, 0]
    assert x == pytest.approx(np.cos(1.0), abs=1e-6)  # ẍ = −k x/m with k = 1: once, not twice


def test_an_array_edited_in_place_is_checked_at_assembly() -> None:
    """``particle.position[0] = nan`` failed as an unstable step after six re-runs at smaller dt; a hinge axis
    zeroed in place as a projection that did not converge (residual nan), naming nothing."""
    scene = mbvi.Scene()
    p = scene.add(mbvi.Particle("a", mass=1.0, position=(1.0, 0.0, 0.0)))
    scene.add(mbvi.Rod("world", "a"))
    p.position[0] = np.nan
    with pytest.raises(ValueError, match=r"Particle 'a': position must be finite"):
        mbvi.simulate(scene, 0.1, 1e-3)

    def arm() -> tuple[mbvi.Scene, mbvi.Revolute]:
        scene = mbvi.Scene()
        scene.add(mbvi.RigidBody("d", mass=1.0, inertia=(0.1, 0.1, 0.1), position=(0.5, 0.0, 0.0)))
        return scene, scene.add(mbvi.Revolute("world", "d", anchor=(0.0, 0.0, 0.0), axis=(0.0, 1.0, 0.0)))

    scene, hinge = arm()
    hinge.axis[:] = 0.0
    with pytest.raises(ValueError, match=r"Revolute 'world-d': axis must be non-zero"):
        mbvi.assemble(scene)
    scene, hinge = arm()
    hinge.axis[:] = (0.0, 2.0, 0.0)  # a longer axis: normalised again, the same hinge
    edited = mbvi.simulate(scene, 0.5, 1e-3).position("d")
    assert np.linalg.norm(hinge.axis) == pytest.approx(1.0, abs=1e-15)
    np.testing.assert_allclose(edited, mbvi.simulate(arm()[0], 0.5, 1e-3).position("d"), atol=1e-14)


def test_a_prismatic_anchor_anywhere_on_a_particles_sliding_line() -> None:
    """The docstring's "world point on b's sliding line" was refused for a particle unless at the particle."""
    scene = mbvi.Scene(gravity=(1.0, 0.0, -9.81))
    scene.add(mbvi.Particle("p", mass=1.0, position=(1.0, 0.0, 0.0)))
    scene.add(mbvi.Prismatic("world", "p", axis=(1.0, 0.0, 0.0), anchor=(5.0, 0.0, 0.0), name="rail",
                             initial_displacement=0.25))  # fmt: skip
    traj = mbvi.simulate(scene, 1.0, 1e-3)
    np.testing.assert_allclose(traj.position("p")[-1], [1.5, 0.0, 0.0], atol=1e-12)  # x₀ + g_x t²/2
    np.testing.assert_allclose(traj.joint_displacement("rail")[[0, -1]], [0.25, 0.75], atol=1e-12)
    off = mbvi.Scene()
    off.add(mbvi.Particle("p", mass=1.0, position=(1.0, 0.0, 0.0)))
    off.add(mbvi.Prismatic("world", "p", axis=(1.0, 0.0, 0.0), anchor=(5.0, 0.5, 0.0)))
    with pytest.raises(ValueError, match=r"particle 'p' is 0.5 m off the sliding line through the anchor"):
        mbvi.assemble(off)


def test_gravity_set_after_construction_is_checked_as_the_constructor_checks_it() -> None:
    scene = mbvi.Scene()
    scene.add(mbvi.Particle("a", mass=1.0, position=(0.0, 0.0, 0.0), velocity=(1.0, 0.0, 0.0)))
    scene.gravity = None  # no gravity, as Scene(gravity=None)
    np.testing.assert_allclose(mbvi.simulate(scene, 1.0, 1e-2).position("a")[-1], [1.0, 0.0, 0.0], atol=1e-12)
    with pytest.raises(ValueError, match="Scene: gravity must be 3 numbers"):
        scene.gravity = "down"
    scene.gravity = (0, 0, -2)
    assert scene.gravity.dtype == float
    np.testing.assert_allclose(mbvi.simulate(scene, 1.0, 1e-2).position("a")[-1], [1.0, 0.0, -1.0], atol=1e-12)


@pytest.mark.parametrize("raise_line", ["import numpy; numpy.zeros(5).reshape(3, -1)", "raise ValueError"])
def test_a_value_error_of_the_scene_files_own_code_says_where_it_came_from(
    raise_line: str, tmp_path: Path, capsys
) -> None:
    """``mbvi: error: cannot reshape array of size 5 into shape (3,newaxis)`` or ``mbvi: error: ValueError``, with
    nothing to say that the scene file's own build() raised it."""
    scene = tmp_path / "own.py"
    scene.write_text(textwrap.dedent(f"""
        import mbvi
        T_END, DT = 0.1, 0.01
        def build():
            {raise_line}
    """))
    assert main(["run", str(scene), "--out", str(tmp_path / "x.npz")]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"mbvi: error: build() of {str(scene)!r}: "), lines
    assert lines[0].endswith("cannot reshape array of size 5 into shape (3,newaxis)" if "reshape" in raise_line
                             else "ValueError")  # fmt: skip


def test_an_orientation_edited_in_place_and_a_force_renamed_to_a_fresh_name_are_named() -> None:
    """``body.orientation[0, 0] = 2`` passed the finiteness test and was blamed on the joint ("initial positions
    violate the joint (residual 3)"); a force renamed to a name no one has kept the old one taken."""
    scene = mbvi.Scene()
    body = scene.add(mbvi.RigidBody("b", mass=1.0, inertia=(1.0, 1.0, 1.0), position=(0.0, 0.0, -1.0)))
    scene.add(mbvi.Spherical("world", "b", anchor=(0.0, 0.0, 0.0)))
    body.orientation[0, 0] = 2.0
    with pytest.raises(ValueError, match=r"RigidBody 'b': orientation is not a rotation matrix"):
        mbvi.assemble(scene)
    body.orientation = np.eye(3)
    spring = scene.add(mbvi.Spring("world", "b", stiffness=1.0, name="k"))
    mbvi.assemble(scene)
    spring.name = "other"
    with pytest.raises(ValueError, match=r"Spring 'other': renamed after it was added"):
        mbvi.assemble(scene)
