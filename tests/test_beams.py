"""Elastic beams: the axial bar ρA u_tt = (EA u_x)_x and the Euler–Bernoulli cantilever.

Static deflections and natural frequencies against their closed forms (and the axial chain's exact
discrete spectrum), wave speed from simulation, beam nodes used as bodies, the strain read-out, and
the bending law's derivatives.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scene_loader import load_scene

import mbvi

E, RHO = 2.1e11, 7850.0  # steel
C = math.sqrt(E / RHO)  # axial wave speed, m/s
BETA = np.array([1.875104068711961, 4.694091132974175, 7.854757438237613])  # cantilever: cos β cosh β = −1


axial_beam = load_scene("axial_beam")
cantilever = load_scene("cantilever")


def _fraction(system: mbvi.System, shapes: np.ndarray, axis: int) -> np.ndarray:
    """Share of each mode's kinetic energy (mass-weighted) in coordinate direction ``axis`` (0, 1, 2)."""
    idx = np.arange(axis, system.nq, 3)
    m = system.mass
    return np.sum(m[idx, None] * shapes[idx] ** 2, axis=0) / np.sum(m[:, None] * shapes**2, axis=0)


# -- the axial bar -----------------------------------------------------------------------------------


@pytest.mark.parametrize("segments", [1, 7, 40])
def test_bar_tip_extension_is_fl_over_ea(segments: int) -> None:
    f, length, area = 1e4, 1.0, 1e-4
    scene = axial_beam.build(segments=segments, force=f, load="constant", length=length, area=area)
    eq = mbvi.equilibrium(scene)
    tip = eq.position(f"bar[{segments}]")
    np.testing.assert_allclose(tip, [length + f * length / (E * area), 0.0, 0.0], rtol=1e-10, atol=1e-15)
    assert eq.stable  # tension stiffens the string-like bar sideways
    # every segment carries the same strain f/EA
    x = np.array([eq.position(n) for n in scene.beams["bar"].nodes])
    strain = np.linalg.norm(np.diff(x, axis=0), axis=1) / (length / segments) - 1
    np.testing.assert_allclose(strain, f / (E * area), rtol=1e-8)


def test_unloaded_bar_is_neutral_sideways() -> None:
    eq = mbvi.equilibrium(axial_beam.build(force=0.0, load="constant"))
    assert not eq.stable  # no bending stiffness, no tension: zero transverse stiffness
    assert np.sum(np.abs(eq.tangent_eigenvalues) < 1e-12 * np.max(eq.tangent_eigenvalues)) == 2 * 40


def test_bar_natural_frequencies() -> None:
    n_seg, length = 40, 1.0
    scene = axial_beam.build(segments=n_seg, force=0.0, load="constant", length=length)
    omega, shapes = mbvi.modes(scene)
    system = mbvi.assemble(scene)
    axial = omega[_fraction(system, shapes, 0) > 0.99]  # the transverse modes are floppy: ω = 0
    assert len(axial) == n_seg
    n = np.arange(1, 4)
    # continuum: (2n − 1)πc/2L within 0.5 %
    np.testing.assert_allclose(axial[:3], (2 * n - 1) * math.pi * C / (2 * length), rtol=5e-3)
    # the lumped chain's exact spectrum: ω = (2c/ℓ) sin((2n − 1)π/4N) (fixed–free, half mass at the tip)
    n = np.arange(1, n_seg + 1)
    ell = length / n_seg
    np.testing.assert_allclose(axial, 2 * C / ell * np.sin((2 * n - 1) * math.pi / (4 * n_seg)), rtol=1e-9)


def test_pulse_travels_at_the_wave_speed() -> None:
    n_seg, length = 100, 1.0
    ell = length / n_seg
    scene = axial_beam.build(segments=n_seg, length=length, load="pulse", duration=0.2 * length / C)
    dt = 0.5 * ell / C
    traj = mbvi.simulate(scene, t_end=length / C, dt=dt, integrator="verlet")
    nodes = np.arange(n_seg // 4, 3 * n_seg // 4 + 1)
    v = np.stack([traj.velocity(f"bar[{j}]")[:, 0] for j in nodes], axis=1)
    k = np.argmax(v, axis=0)  # the pulse's peak passes node j at t_k (refined by a parabola)
    cols = np.arange(len(nodes))
    y0, y1, y2 = v[k - 1, cols], v[k, cols], v[k + 1, cols]
    t_peak = traj.t[k] + 0.5 * (y0 - y2) / (y0 - 2 * y1 + y2) * dt
    speed = -1.0 / np.polyfit(nodes * ell, t_peak, 1)[0]
    assert speed == pytest.approx(C, rel=1e-2)


def test_pulse_at_the_magic_time_step_is_an_exact_travelling_wave() -> None:
    # at dt = ℓ/c the discrete wave equation has the exact solution u_j^k = F(j + k): every node repeats
    # its right neighbour's motion one step later
    n_seg, length = 40, 1.0
    ell = length / n_seg
    scene = axial_beam.build(segments=n_seg, length=length, load="pulse", duration=0.2 * length / C)
    traj = mbvi.simulate(scene, t_end=length / C, dt=ell / C, integrator="verlet")
    u = np.stack([traj.position(f"bar[{j}]")[:, 0] - j * ell for j in range(n_seg + 1)], axis=1)
    assert np.max(np.abs(u)) > 1e-6
    k = len(traj.t) - 1  # = n_seg: the front reaches the clamp, no reflection yet
    np.testing.assert_allclose(u[1:k, 1 : n_seg - 1], u[: k - 1, 2:n_seg], rtol=0, atol=1e-9 * np.max(np.abs(u)))


def test_hanging_bar_carries_its_weight_and_a_weight_on_a_rod() -> None:
    # beam nodes as bodies: a weight hangs on a rod from the tip node of a vertical bar
    n_seg, length, area, weight, g = 10, 2.0, 1e-4, 50.0, 9.81
    scene = mbvi.Scene(gravity=(0.0, 0.0, -g))
    beam = scene.add(
        mbvi.Beam("bar", (0, 0, 0), (0, 0, -length), n_seg, density=RHO, area=area, youngs_modulus=E, clamp="start")
    )
    scene.add(mbvi.Particle("weight", mass=weight, position=(0.0, 0.0, -length - 0.3)))
    scene.add(mbvi.Rod(f"bar[{n_seg}]", "weight", name="hook"))
    eq = mbvi.equilibrium(scene)
    # lumped masses reproduce the continuum exactly here: ΔL = W L/EA + ρ g L²/2E
    extension = weight * g * length / (E * area) + RHO * g * length**2 / (2 * E)
    np.testing.assert_allclose(eq.position(f"bar[{n_seg}]"), [0, 0, -length - extension], rtol=0, atol=1e-12)
    assert eq.multipliers[list(mbvi.assemble(scene).rows.owner).index("Rod 'hook'")] == pytest.approx(weight * g)
    np.testing.assert_allclose(eq.constraint_force("hook"), [0.0, 0.0, weight * g], rtol=0, atol=1e-10 * weight * g)
    # released at its equilibrium the assembly stays at rest; strain read-out matches the positions
    traj = mbvi.simulate(scene, t_end=2e-3, dt=2e-6, initial_state=eq.state)
    assert np.max(np.abs(traj.position("weight") - eq.position("weight"))) < 1e-12
    strain = traj.strain("bar")
    assert strain.shape == (len(traj.t), n_seg)
    x = np.stack([traj.position(node) for node in beam.nodes], axis=1)
    np.testing.assert_allclose(strain, np.linalg.norm(np.diff(x, axis=1), axis=-1) / beam.segment_length - 1)
    # segment i (from the clamp) carries the weight and the bar below its mid-point... in lumped form
    below = weight + RHO * area * beam.segment_length * (n_seg - np.arange(n_seg) - 0.5)
    np.testing.assert_allclose(strain[-1], below * g / (E * area), rtol=1e-7)


def test_strain_read_out_follows_a_stretched_bar_in_motion() -> None:
    traj = mbvi.simulate(axial_beam.build(load="step"), t_end=2e-4, dt=4e-6)
    strain = traj.strain("bar")
    x = np.stack([traj.position(f"bar[{i}]") for i in range(41)], axis=1)
    np.testing.assert_allclose(strain, np.linalg.norm(np.diff(x, axis=1), axis=-1) / (1.0 / 40) - 1, atol=1e-15)
    assert strain.max() > 0.5 * 1e4 / (E * 1e-4)  # the step load's tension wave has passed
    with pytest.raises(ValueError, match="unknown beam"):
        traj.strain("nobeam")


# -- the cantilever ----------------------------------------------------------------------------------


@pytest.mark.parametrize("clamp", ["start", "end"])
def test_cantilever_tip_deflection_is_pl3_over_3ei(clamp: str) -> None:
    length, width, height, n_seg = 1.0, 0.02, 0.01, 20
    EI = E * width * height**3 / 12
    P = 1e-4 * 3 * EI / length**3  # deflection 1e-4 L: linear theory holds
    scene = mbvi.Scene(gravity=None)
    start, end = ((0, 0, 0), (length, 0, 0)) if clamp == "start" else ((length, 0, 0), (0, 0, 0))
    beam = mbvi.Beam(
        "beam", start, end, n_seg, density=RHO, area=width * height, youngs_modulus=E,
        second_moment=width * height**3 / 12, clamp=clamp,
    )  # fmt: skip
    scene.add(beam)
    tip = beam.nodes[-1] if clamp == "start" else beam.nodes[0]
    scene.add(mbvi.ExternalForce(tip, force=(0.0, 0.0, -P)))
    eq = mbvi.equilibrium(scene)
    assert eq.stable
    assert -eq.position(tip)[2] == pytest.approx(P * length**3 / (3 * EI), rel=1e-2)
    assert abs(eq.position(tip)[1]) < 1e-15


@pytest.mark.parametrize("segments", [10, 20])
def test_cantilever_clamp_carries_the_tip_load_and_nothing_else(segments: int) -> None:
    """A steel cantilever under a 10 N tip load along −z: its clamp pushes back 10 N along z and nothing along x.
    The solve stopped on a Newton step under 1e-12 m, which a 4e8 N/m element turns into 1e-4 N: the clamp showed a
    5e-6 N reaction to no load and the balance a residual of 5e-5 N."""
    scene = mbvi.Scene(gravity=None)
    scene.add(mbvi.Beam("beam", (0, 0, 0), (1, 0, 0), segments, density=RHO, area=2e-4, youngs_modulus=E,
                        second_moment=0.02 * 0.01**3 / 12, clamp="start"))  # fmt: skip
    scene.add(mbvi.ExternalForce(f"beam[{segments}]", force=(0.0, 0.0, -10.0)))
    eq = mbvi.equilibrium(scene)
    reaction = eq.constraint_force("beam:clamp[0]")
    assert reaction[2] == pytest.approx(10.0, rel=1e-9)
    assert abs(reaction[0]) < 1e-7  # of a 10 N load: the balance's tolerance, not 5e-6 N
    assert eq.residual < 1e-6


def test_cantilever_sags_under_its_weight_as_ql4_over_8ei() -> None:
    scene = cantilever.build(segments=20, tip_load=0.0, g=9.81)
    eq = mbvi.equilibrium(scene)
    EI, q = E * 0.02 * 0.01**3 / 12, RHO * 0.02 * 0.01 * 9.81
    assert -eq.position("beam[20]")[2] == pytest.approx(q / (8 * EI), rel=1e-2)


def test_cantilever_first_bending_frequency() -> None:
    n_seg, length, width, height = 20, 1.0, 0.02, 0.01
    scene = cantilever.build(segments=n_seg, length=length, width=width, height=height, tip_load=0.0, g=0.0)
    omega, shapes = mbvi.modes(scene, count=6)
    system = mbvi.assemble(scene)
    EI, rhoA = E * width * height**3 / 12, RHO * width * height
    expected = BETA**2 * math.sqrt(EI / rhoA) / length**2
    in_plane = _fraction(system, shapes, 2)  # bending in the x–z (load) plane; x–y is its twin
    sideways = _fraction(system, shapes, 1)
    assert np.all(in_plane + sideways > 0.999)  # the lowest modes are pure bending
    for pair in range(3):
        w = omega[2 * pair : 2 * pair + 2]
        assert w[1] == pytest.approx(w[0], rel=1e-9)  # square-free: both planes alike
        assert np.sum(in_plane[2 * pair : 2 * pair + 2]) == pytest.approx(1.0, abs=1e-6)  # one mode in the plane
    assert omega[0] == pytest.approx(expected[0], rel=1e-2)
    assert omega[2] == pytest.approx(expected[1], rel=2e-2)  # coarser: 1.06 % at 20 segments


def test_cantilever_released_at_its_deflection_stays_there() -> None:
    scene = cantilever.build(segments=10, tip_load=5.0)
    eq = mbvi.equilibrium(scene)
    traj = mbvi.simulate(scene, t_end=0.05, dt=1e-3, integrator="midpoint", initial_state=eq.state)
    assert np.max(np.abs(traj.q - eq.q)) < 1e-11
    moving = mbvi.simulate(scene, t_end=0.05, dt=1e-3, integrator="midpoint")
    assert np.max(np.abs(moving.q - eq.q)) > 1e-3


def test_bending_law_derivatives() -> None:
    scene = mbvi.Scene(gravity=None)
    scene.add(mbvi.Beam("b", (0, 0, 0), (1, 0.3, 0.2), 6, density=1e3, area=1e-3, youngs_modulus=1e6,
                        second_moment=1e-6, clamp="both"))  # fmt: skip
    system = mbvi.assemble(scene)
    law = next(law for law in system.laws if law.name == "beam_bending")
    q = system.layout.q0 + 0.02 * np.random.default_rng(1).standard_normal(system.nq)
    errors = mbvi.check_force_law(law, q, np.zeros(system.nq), 0.0)
    assert errors["gradient"] < 1e-7 and errors["hessian"] < 1e-7
    # the straight beam along its clamped axis has no bending energy
    assert law.potential(system.layout.q0) < 1e-25


def test_bending_energy_of_an_arc() -> None:
    # nodes on a circle of radius R turn by φ = 2 asin(ℓ/2R) at each interior node: U = Σ (EI/ℓ)(1 − cos φ)
    R, n_seg, EI = 2.0, 12, 3.0
    angles = np.linspace(0.0, 1.2, n_seg + 1)
    pts = np.column_stack([R * np.sin(angles), np.zeros_like(angles), R * (1 - np.cos(angles))])
    ell = float(np.linalg.norm(pts[1] - pts[0]))
    scene = mbvi.Scene(gravity=None)
    scene.add(mbvi.Beam("b", (0, 0, 0), (n_seg * ell, 0, 0), n_seg, density=1.0, area=1.0, youngs_modulus=EI,
                        second_moment=1.0))  # fmt: skip
    system = mbvi.assemble(scene)
    law = next(law for law in system.laws if law.name == "beam_bending")
    phi = angles[1] - angles[0]
    exact = (n_seg - 1) * EI / ell * (1 - math.cos(phi))
    assert law.potential(pts.ravel()) == pytest.approx(exact, rel=1e-12)
    # ≈ the continuum ∫ EI κ²/2 ds over the interior, κ = 1/R
    assert law.potential(pts.ravel()) == pytest.approx(EI * (n_seg - 1) * ell / (2 * R**2), rel=1e-3)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"segments": 0}, "segments"),
        ({"clamp": "middle"}, "clamp"),
        ({"clamp": {"middle": "hub"}}, "clamp's keys are 'start' and 'end'"),
        ({"clamp": {"start": 3}}, r"clamp\['start'\] must name a body"),
        ({"clamp": ["start"]}, "or a mapping"),
        ({"density": -1.0}, "density"),
        ({"end": (0, 0, 0)}, "coincide"),
    ],
)
def test_beam_rejects_bad_input(kwargs: dict, match: str) -> None:
    args = {"name": "b", "start": (0, 0, 0), "end": (1, 0, 0), "segments": 4, "density": 1.0, "area": 1.0,
            "youngs_modulus": 1.0} | kwargs  # fmt: skip
    with pytest.raises(ValueError, match=match):
        mbvi.Beam(**args)


def _wire(thickness: float, segments: int) -> tuple[mbvi.Scene, float, float]:
    """A 1 m steel cantilever of square section, its tip loaded for a deflection of 1e-3 m (Euler–Bernoulli): the
    scene, that deflection and the first bending frequency (rad/s)."""
    area, second = thickness**2, thickness**4 / 12
    load = 1e-3 * 3 * E * second
    scene = mbvi.Scene(gravity=None)
    scene.add(mbvi.Beam("w", start=(0, 0, 0), end=(1.0, 0, 0), segments=segments, density=RHO, area=area,
                        youngs_modulus=E, second_moment=second, clamp="start"))  # fmt: skip
    scene.add(mbvi.ExternalForce(f"w[{segments}]", force=(0, 0, -load)))
    return scene, 1e-3, BETA[0] ** 2 * math.sqrt(E * second / (RHO * area))


@pytest.mark.parametrize(("thickness", "segments"), [(1e-4, 100), (3e-4, 300), (1e-5, 20)])
def test_slender_wires_bend_as_euler_bernoulli_says(thickness: float, segments: int) -> None:
    """A 0.1 mm wire in 100 segments (its lowest bending 1e-12 of its nodes' axial stiffness): its bending modes
    counted as zero, ``stable`` False, ω₁ = 0 — statics took curvatures below 1e-12 of that scale for none."""
    scene, deflection, omega1 = _wire(thickness, segments)
    eq = mbvi.equilibrium(scene)
    assert eq.stable
    np.testing.assert_allclose(-eq.position(f"w[{segments}]")[2], deflection, rtol=3e-3)
    omega, _ = mbvi.modes(eq, count=1)
    np.testing.assert_allclose(omega[0], omega1, rtol=3e-3)


def test_a_wire_too_slender_for_its_segments_is_named_with_the_segments_it_may_have() -> None:
    """A 10 µm wire in 100 segments (bending 1e-14 of the axial scale) came back with a third of its deflection,
    saying nothing; with the segments the warning names it is right."""
    with pytest.warns(mbvi.statics.UnresolvedBeamWarning, match=r"Beam 'w': .* use at most 22 segments"):
        mbvi.equilibrium(_wire(1e-5, 100)[0])
    scene, deflection, _ = _wire(1e-5, 22)
    eq = mbvi.equilibrium(scene)  # (no warning: the suite turns warnings into errors)
    np.testing.assert_allclose(-eq.position("w[22]")[2], deflection, rtol=3e-3)


def test_a_beam_keeps_the_parameters_it_was_made_with() -> None:
    """b.youngs_modulus = -2.1e11 after scene.add(b) was taken unchecked, and half applied: the bending law read it
    again while the springs were built already (equilibrium folded the beam back on itself); b.end swung the
    clamp's tangent round. segments=True was a beam of one segment."""
    beam = mbvi.Beam("b", start=(0, 0, 0), end=(1, 0, 0), segments=4, density=RHO, area=1e-4, youngs_modulus=E,
                     second_moment=1e-9, clamp="start")  # fmt: skip
    scene = mbvi.Scene(gravity=(0, 0, -9.81))
    scene.add(beam)
    for key, value in (("youngs_modulus", -2.1e11), ("end", (0, 1, 0)), ("segments", 8)):
        with pytest.raises(AttributeError, match=f"Beam 'b': {key} is fixed once the beam is made"):
            setattr(beam, key, value)
    assert beam.youngs_modulus == E and beam.segments == 4
    with pytest.raises(ValueError, match="segments must be a positive integer, got True"):
        mbvi.Beam("c", start=(0, 0, 0), end=(1, 0, 0), segments=True, density=RHO, area=1e-4, youngs_modulus=E)


@pytest.mark.parametrize(("scene", "params", "match"), [
    ("cantilever", {"length": -1.0}, "cantilever: length must be a positive number of metres, got -1.0"),
    ("cantilever", {"width": -0.02, "height": -0.01}, "cantilever: width must be"),
    ("axial_beam", {"length": -1.0}, "axial_beam: length must be a positive number"),
    ("axial_beam", {"duration": -1.0}, "axial_beam: duration must be a positive number"),
    ("axial_beam", {"duration": 0.0}, "axial_beam: duration must be a positive number"),
])  # fmt: skip
def test_the_beam_scenes_refuse_what_would_make_another_scene(scene: str, params: dict, match: str) -> None:
    """A negative length built the beam along −x (the bar's tip load then compressed it), a negative section a
    positive area and I; a negative pulse duration never applied the load, a zero one divided by zero mid-run."""
    with pytest.raises(ValueError, match=match):
        load_scene(scene).build(**params)


# -- a beam welded to a rigid body -------------------------------------------------------------------


def _hub_and_beam(
    clamp, *, gravity=None, orientation=None, hub_joint="fixed", segments=20, length=1.0, spin=(0.0, 0.0, 0.0)
):
    """A rigid hub (held by ``hub_joint``: "fixed" to the world, "revolute" about y at its centre, or None: free,
    spinning at ``spin``, rad/s) with a steel beam along +x (or, with gravity, hanging along −z) from its centre,
    clamped by ``clamp``."""
    scene = mbvi.Scene(gravity=gravity)
    scene.add(mbvi.RigidBody("hub", mass=1.0, inertia=(0.015, 0.02, 0.025), position=(0, 0, 0),
                             orientation=np.eye(3) if orientation is None else orientation,
                             angular_velocity=spin))  # fmt: skip
    if hub_joint == "fixed":
        scene.add(mbvi.Fixed("world", "hub"))
    elif hub_joint == "revolute":
        scene.add(mbvi.Revolute("world", "hub", axis=(0, 1, 0), anchor=(0, 0, 0)))
    end = (0, 0, -length) if gravity is not None else (length, 0, 0)
    scene.add(mbvi.Beam("b", (0, 0, 0), end, segments, density=RHO, area=2e-4, youngs_modulus=E,
                        second_moment=0.02 * 0.01**3 / 12, clamp=clamp))  # fmt: skip
    return scene


@pytest.mark.parametrize("turn", [0.0, 0.7])
def test_a_beam_welded_to_a_held_body_deflects_as_one_clamped_to_the_world(turn: float) -> None:
    """Welded to a hub fixed to the world (turned by ``turn`` rad about z, or not), the cantilever under a tip load
    takes the world-clamped beam's deflection (PL³/3EI to discretization), and the hub's joint carries the load's
    moment about the hub."""
    P, EI = 10.0, E * 0.02 * 0.01**3 / 12
    turned = np.array([[math.cos(turn), -math.sin(turn), 0], [math.sin(turn), math.cos(turn), 0], [0, 0, 1]])
    tips = {}
    for clamp in ("start", {"start": "hub"}):
        scene = _hub_and_beam(clamp, orientation=turned)
        scene.add(mbvi.ExternalForce("b[20]", force=(0.0, 0.0, -P)))
        eq = mbvi.equilibrium(scene)
        assert eq.stable
        tips[str(clamp)] = eq.position("b[20]")
    assert tips["{'start': 'hub'}"] == pytest.approx(tips["start"], rel=1e-9, abs=1e-12)
    assert -tips["start"][2] == pytest.approx(P / (3 * EI), rel=2e-3)
    # the hub holds the beam: its joint's moment is the tip load's about the hub, −P x_tip about y (x_tip: the bent
    # beam's reach, 5e-5 short of L), and nothing about x or z
    reach = eq.position("b[20]")[0]
    assert eq.constraint_torque("world-hub") == pytest.approx([0.0, -P * reach, 0.0], abs=1e-9 * P)


def test_a_stiff_beam_welded_to_a_hinged_hub_swings_as_one_compound_pendulum() -> None:
    """A hub on a hinge at its centre, with a steel beam hanging from it welded on: the lowest mode is the compound
    pendulum of hub and beam, ω² = g Σ mᵢ rᵢ / (I_hub + Σ mᵢ rᵢ²) (lumped masses), to the beam's flexibility.
    Pinned instead of welded, the hub spins freely (a zero mode) and the beam swings alone."""
    g, n = 9.81, 10
    m = RHO * 2e-4 * (1.0 / n) * np.r_[0.5, np.ones(n - 1), 0.5]
    r = np.linspace(0.0, 1.0, n + 1)
    pendulum = math.sqrt(g * np.sum(m * r) / (0.02 + np.sum(m * r**2)))
    welded, _ = mbvi.modes(_hub_and_beam({"start": "hub"}, gravity=(0, 0, -g), hub_joint="revolute", segments=n))
    assert welded[0] == pytest.approx(pendulum, rel=1e-4)
    assert welded[1] > 10 * pendulum  # the next is the beam's own bending
    pinned = _hub_and_beam(None, gravity=(0, 0, -g), hub_joint="revolute", segments=n)
    pinned.add(mbvi.Spherical("hub", "b[0]", anchor=(0, 0, 0)))
    free, _ = mbvi.modes(pinned)
    assert abs(free[0]) < 1e-3 * pendulum
    assert free[1] == pytest.approx(math.sqrt(g * np.sum(m * r) / np.sum(m * r**2)), rel=1e-4)


def test_a_spinning_hub_with_a_welded_beam_keeps_its_angular_momentum() -> None:
    """A free hub spinning in space (200 rad/s) with a beam at rest welded on: the weld's moments are internal, so
    the angular momentum is conserved to round-off (a weld whose moment did not match its force would drift) while
    the hub hands its spin to the beam, and the energy stays in a band."""
    scene = _hub_and_beam({"start": "hub"}, hub_joint=None, segments=10, spin=(6.0, 4.0, 200.0))
    traj = mbvi.simulate(scene, t_end=0.1, dt=1e-5)  # the beam starts at rest (verlet: dt < 1.9e-5, axial waves)
    L = traj.angular_momentum
    assert np.max(np.abs(L - L[0])) < 1e-12 * np.linalg.norm(L[0])
    assert np.ptp(traj.energy) < 1e-5 * traj.energy[0]
    # the weld hands the hub's spin to the beam (pinned, the hub would keep its 200 rad/s): the hub's mean spin over
    # the second half is a few rad/s, and the beam's tip has swept round ~80°
    spin = traj.angular_velocity("hub")[len(traj.t) // 2 :, 2]
    assert abs(np.mean(spin)) < 10.0
    tip = traj.position("b[10]")[-1]
    assert math.degrees(math.atan2(tip[1], tip[0])) > 45.0


@pytest.mark.parametrize(("other", "match"), [("bead", "a particle, which has no orientation"),
                                              ("ghost", "unknown body 'ghost'")])  # fmt: skip
def test_a_weld_to_what_cannot_hold_a_beam_end_is_named(other: str, match: str) -> None:
    scene = mbvi.Scene(gravity=None)
    scene.add(mbvi.Particle("bead", mass=1.0, position=(0, 0, 0)))
    with pytest.raises(ValueError, match=match):
        scene.add(mbvi.Beam("b", (0, 0, 0), (1, 0, 0), 4, density=RHO, area=2e-4, youngs_modulus=E,
                            second_moment=1e-9, clamp={"start": other}))  # fmt: skip
        mbvi.assemble(scene)


# -- a blade spun up on a hub (scenes/spin_up.py) --------------------------------------------------------


def test_a_blade_spun_up_lags_as_a_cantilever_under_its_inertia_then_straightens_stretched() -> None:
    """The spin-up of Simo & Vu-Quoc / Kane et al. (a 10 m blade welded to a motor-driven hub, to 4 rad/s in
    15 s): early on, the tip trails by the quasi-static cantilever deflection under the inertial load ρA α x,
    11 ρA α L⁴/(120 EI); spinning steadily the blade is straight but for a few mm and stretched by the
    centrifugal load to ρA Ω² L³/(3 EA) (the lumped 10-segment chain's 0.48 % more); the motor holds the spin."""
    spin_up = load_scene("spin_up")
    traj = mbvi.simulate(spin_up.build(), t_end=22.0, dt=2e-4)  # verlet, under its 2e-4 s axial limit
    tip = np.einsum("nji,nj->ni", traj.rotation("hub"), traj.position("blade[10]"))  # in the hub's frame
    early = round(2.0 / 2e-4)
    assert -tip[early, 1] == pytest.approx(spin_up.quasi_static_lag(spin_up.hub_angle(2.0)[2]), rel=2e-3)
    assert np.max(-tip[:, 1]) > 0.35  # it lagged (0.40 m at t = 8 s)
    steady = traj.t >= 20.0
    assert np.max(np.abs(traj.joint_rate("motor")[steady] - 4.0)) < 1e-4
    assert np.max(np.abs(tip[steady, 1])) < 5e-3
    lumped = 4.0**2 * (1.2 * sum(j * j for j in range(1, 10)) + 0.6 * 100) / 2.8e7  # Σ_j m_j x_j j Ω² ℓ / EA
    assert np.mean(tip[steady, 0]) - 10.0 == pytest.approx(lumped, rel=3e-3)
    assert lumped == pytest.approx(spin_up.centrifugal_stretch(), rel=6e-3)


def test_an_error_in_a_part_a_beam_adds_names_the_beam() -> None:
    """A node name already taken, or a clamp to an unknown body: the part's error ("duplicate body name 'b[0]'",
    "Spherical 'b:clamp[0]': unknown body 'nohub'") did not say that beam b made that part."""
    scene = mbvi.Scene()
    scene.add(mbvi.Particle("b[0]", mass=1.0, position=(5.0, 0.0, 0.0)))
    beam = dict(start=(0, 0, 0), end=(1, 0, 0), segments=4, density=7800.0, area=1e-4, youngs_modulus=2e11)
    with pytest.raises(ValueError, match=r"^Beam 'b': duplicate body name 'b\[0\]' \(a part it adds\)$"):
        scene.add(mbvi.Beam("b", **beam))
    with pytest.raises(ValueError, match=r"^Beam 'c': Spherical 'c:clamp\[0\]': unknown body 'nohub'"):
        scene.add(mbvi.Beam("c", **beam, clamp={"start": "nohub"}))
    assert [body.name for body in scene.bodies] == ["b[0]"]  # as it was
