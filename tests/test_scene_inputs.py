"""The example scenes take their parameters from the command line (``--param name=value``, read with
ast.literal_eval, else kept as a string) and from Python: what they accepted silently or refused with a message
naming nothing, what they computed wrong, and what their texts claimed. Each test here failed on the scenes
before the change (run against ``git show HEAD:scenes/X.py`` copies)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import mpmath
import numpy as np
import pytest
from scipy.optimize import brentq

import mbvi
from mbvi.cli import main
from mbvi.scenefile import load_scene_module

SCENES = Path(__file__).resolve().parents[1] / "scenes"


def scene(name: str):
    return load_scene_module(SCENES / f"{name}.py")


def _refused(name: str, message: str, **params) -> None:
    """build(**params) of scenes/NAME.py raises a ValueError with exactly ``message``."""
    with pytest.raises(ValueError) as info:
        scene(name).build(**params)
    assert str(info.value) == message


# -- hanging_chain: fine chains, span and links ----------------------------------------------------------


def test_a_hanging_chain_of_2000_links_has_rods_of_length_over_links_on_its_arc() -> None:
    """links=1000 and more failed: brentq stopped at its default xtol 2e-12 with θ ≈ π/N, a relative 6e-9,
    which the two end chords absorbed, and every rod took the first chord's length: 'Rod 'rod1': initial
    positions violate the joint'."""
    links, length = 2000, 1.5
    built = scene("hanging_chain").build(links=links, length=length)
    ell = length / links
    ends = {"world": None}
    for rod in built.joints:
        a = rod.anchor_a if rod.a in ends else built.body(rod.a).position
        b = rod.anchor_b if rod.b in ends else built.body(rod.b).position
        distance = np.linalg.norm(np.asarray(b) - np.asarray(a))
        assert abs(rod.length - distance) <= 1e-12 * ell, rod.name  # each rod as long as it starts
        assert abs(rod.length - ell) <= 1e-11 * ell, rod.name  # and all of them ℓ = length/links
    assert len(built.joints) == links


def _discrete_catenary(links: int, length: float, span: float, mass: float, g: float) -> tuple[float, np.ndarray]:
    """Horizontal tension H (N) and the joint points of the symmetric discrete catenary, from force balance
    alone: rod i carries the vertical tension Vᵢ = (mass/links) g ((N − 1)/2 − i)."""
    ell = length / links
    V = mass / links * g * ((links - 1) / 2 - np.arange(links))
    H = brentq(lambda H: np.sum(ell * H / np.hypot(H, V)) - span, 1e-9, 1e9, xtol=1e-15, rtol=1e-15)
    steps = ell * np.column_stack([np.full_like(V, H), np.zeros_like(V), -V]) / np.hypot(H, V)[:, None]
    return H, np.vstack([np.zeros(3), np.cumsum(steps, axis=0)])


def test_a_hanging_chain_of_1000_links_assembles_and_hangs_as_the_discrete_catenary() -> None:
    """The scene assembles at 1000 links (it raised), and the discrete catenary (constant horizontal tension,
    mass/links at each joint, rods ℓ = length/links) is its equilibrium: the gravity load lies in the span of
    the rods' constraint forces, each pulling its joint horizontally with the same H. (mbvi.equilibrium takes
    minutes at this size; the scene's own equilibrium is tested at 10–40 links in test_statics.)"""
    links, length, span, mass, g = 1000, 1.5, 1.0, 1.0, 9.81
    system = mbvi.assemble(scene("hanging_chain").build(links=links))
    H, X = _discrete_catenary(links, length, span, mass, g)
    np.testing.assert_allclose(X[-1], [span, 0.0, 0.0], atol=1e-12)
    q = system.layout.q0.copy()
    cols = np.array([system.layout.offset[f"p{i}"] for i in range(1, links)])
    q[(cols[:, None] + np.arange(3)).ravel()] = X[1:-1].ravel()
    assert np.max(np.abs(system.constraints(q) / system.constraint_scale)) < 1e-12  # rods of ℓ
    G = system.constraint_jacobian(q).toarray()
    grad = system.potential_gradient(q)
    np.testing.assert_allclose(grad[cols + 2], mass / links * g, rtol=1e-12)  # the joints' weights
    lam = np.linalg.lstsq(G.T, -grad, rcond=None)[0]
    assert np.linalg.norm(G.T @ lam + grad) < 1e-9 * np.linalg.norm(grad)  # in equilibrium
    # horizontal force of rod i on the joint p{i+1} (the last rod: on p{N−1}): all H
    horizontal = np.abs(lam * G[np.arange(links), np.append(cols, cols[-1])])
    np.testing.assert_allclose(horizontal, H, rtol=1e-9)
    # and it tends to the continuous catenary: sag error of O(1/N²) (at 500 links the scene's own
    # equilibrium sagged 0.5026345560 m)
    a = brentq(lambda a: 2 * a * math.sinh(span / (2 * a)) - length, 0.01, 100.0, xtol=1e-15)
    sag = a * (math.cosh(span / (2 * a)) - 1)
    sag_500 = -_discrete_catenary(500, length, span, mass, g)[1][250, 2]
    assert sag_500 == pytest.approx(0.5026345560, abs=2e-10)
    assert abs(-X[links // 2, 2] - sag) == pytest.approx(abs(sag_500 - sag) / 4, rel=0.01)


@pytest.mark.parametrize(
    "params, message",
    [
        ({"span": 0}, "hanging_chain: span must be a positive number of metres, got 0"),
        ({"span": -1.0}, "hanging_chain: span must be a positive number of metres, got -1.0"),
        ({"span": 1.5}, "hanging_chain: the chain (length 1.5 m) must be longer than the distance between its "
                        "supports (span 1.5 m, height 0 m: 1.5 m); shorten span or lengthen the chain"),
        ({"span": 2.0}, "hanging_chain: the chain (length 1.5 m) must be longer than the distance between its "
                        "supports (span 2 m, height 0 m: 2 m); shorten span or lengthen the chain"),
        ({"links": 2.5}, "hanging_chain: links must be a whole number of rods >= 2, got 2.5"),
        ({"links": True}, "hanging_chain: links must be a whole number of rods >= 2, got True"),
        ({"links": "abc"}, "hanging_chain: links must be a whole number of rods >= 2, got 'abc'"),
    ],
)  # fmt: skip
def test_a_hanging_chain_refuses_a_span_it_cannot_hang_in_and_fractional_links(params, message) -> None:
    """span=0 gave brentq's 'f(a) and f(b) must have different signs', links=2.5 a Rod's violated joint."""
    _refused("hanging_chain", message, **params)


# -- spinning_top: steady from the command line, precession near a horizontal axis ----------------------


@pytest.mark.parametrize("steady", ["false", "no", "False", 0, None])
def test_the_spinning_top_refuses_a_steady_that_is_not_a_bool(steady) -> None:
    """--param steady=false arrives as the string 'false', which is truthy: the top was built in steady
    precession, the opposite of what was asked, without a word."""
    _refused(
        "spinning_top",
        f"spinning_top: steady must be True or False, got {steady!r} "
        "(on the command line: --param steady=True or --param steady=False)",
        steady=steady,
    )


def test_the_spinning_top_takes_numpy_bools() -> None:
    top = scene("spinning_top")
    released = top.build(steady=np.False_).body("top")
    e3 = np.asarray(released.orientation)[:, 2]  # the symmetry axis
    np.testing.assert_allclose(released.angular_velocity, 80.0 * e3, atol=1e-12)  # spin only: no precession
    precessing = top.build(steady=np.True_).body("top")
    np.testing.assert_allclose(precessing.angular_velocity, top.build(steady=True).body("top").angular_velocity)


def test_the_precession_rate_near_a_horizontal_axis_keeps_its_digits() -> None:
    """(b − √(b² − 4ac))/2a cancelled as a = A cos θ → 0: 3.4e-5 off at θ = π/2 − 1e-11."""
    top = scene("spinning_top")
    m, J = mbvi.Cylinder(0.05, 0.02).mass_properties(7800.0)
    arm, spin, g = 0.04, 80.0, 9.81
    mpmath.mp.dps = 50
    for tilt in (math.pi / 2 - 1e-11, math.pi / 2 - 1e-6, 0.5, math.pi / 2, math.pi / 2 + 1e-9):
        A = mpmath.mpf(float(J[0])) + mpmath.mpf(m) * mpmath.mpf(arm) ** 2
        a, b = A * mpmath.cos(mpmath.mpf(tilt)), mpmath.mpf(float(J[2])) * mpmath.mpf(spin)
        c = mpmath.mpf(m) * mpmath.mpf(g) * mpmath.mpf(arm)
        exact = 2 * c / (b + mpmath.sqrt(b * b - 4 * a * c))  # the slow root, at 50 digits
        got = top.precession_rate(m, arm, float(J[0]), float(J[2]), spin, tilt, g)
        assert abs(got / float(exact) - 1) < 4e-16, tilt


# -- lengths and other parameters that must be positive ------------------------------------------------


@pytest.mark.parametrize(
    "name, params, message",
    [
        ("pendulum", {"length": -1.0}, "pendulum: length must be a positive number of metres, got -1.0"),
        ("pendulum", {"length": 0}, "pendulum: length must be a positive number of metres, got 0"),
        ("pendulum", {"length": math.inf}, "pendulum: length must be a positive number of metres, got inf"),
        ("pendulum", {"length": True}, "pendulum: length must be a positive number of metres, got True"),
        ("loaded_pendulum", {"length": -1.0}, "loaded_pendulum: length must be a positive number of metres, got -1.0"),
        ("double_pendulum", {"l1": -1.0}, "double_pendulum: l1 must be a positive number of metres, got -1.0"),
        ("double_pendulum", {"l2": 0.0}, "double_pendulum: l2 must be a positive number of metres, got 0.0"),
        ("chain", {"length": -1.0}, "chain: length must be a positive number of metres, got -1.0"),
        ("chain", {"length": 0.0}, "chain: length must be a positive number of metres, got 0.0"),
        ("rigid_chain", {"length": 0.0}, "rigid_chain: length must be a positive number of metres, got 0.0"),
        ("rigid_chain", {"length": -1.0}, "rigid_chain: length must be a positive number of metres, got -1.0"),
        ("four_bar", {"crank": -0.3}, "four_bar: crank must be a positive link length in metres, got -0.3"),
        ("four_bar", {"crank": 0}, "four_bar: crank must be a positive link length in metres, got 0"),
        ("four_bar", {"coupler": 0.0}, "four_bar: coupler must be a positive link length in metres, got 0.0"),
        ("four_bar", {"rocker": -0.8}, "four_bar: rocker must be a positive link length in metres, got -0.8"),
        ("four_bar", {"ground": 0.0}, "four_bar: ground must be a positive link length in metres, got 0.0"),
        ("four_bar", {"theta": math.nan}, "four_bar: theta must be a finite crank angle in radians, got nan"),
        ("damped_pendulum", {"length": -1.0},
         "damped_pendulum: length must be a positive number of metres, got -1.0"),
        ("damped_pendulum", {"g": -1.0}, "damped_pendulum: g must be a positive number of m/s² (the damping ratio "
                                         "is that of the linearized pendulum, ω₀ = √(g/l)), got -1.0"),
        ("damped_pendulum", {"g": 0.0, "model": "joint"}, "damped_pendulum: g must be a positive number of m/s² "
                                                          "(the damping ratio is that of the linearized pendulum, "
                                                          "ω₀ = √(g/l)), got 0.0"),
        ("hirai_pendulum", {"length": 1e200}, "hirai_pendulum: length must be a positive number of metres up to "
                                              "1e150 (l² must not overflow), got 1e+200"),
        ("hirai_pendulum", {"length": -2.0}, "hirai_pendulum: length must be a positive number of metres up to "
                                             "1e150 (l² must not overflow), got -2.0"),
    ],
)  # fmt: skip
def test_a_length_that_is_not_positive_is_refused_by_name(name, params, message) -> None:
    """Negative lengths built another experiment (pendulum length=-1 started at −135° for 45°), zero ones
    failed at assembly naming a joint, damped_pendulum gave 'math domain error', hirai_pendulum length=1e200
    an OverflowError."""
    _refused(name, message, **params)


def test_a_pendulum_still_starts_where_it_is_asked_to() -> None:
    bob = scene("pendulum").build(length=2.0, theta0=math.pi / 4).body("bob")
    np.testing.assert_allclose(bob.position, [math.sqrt(2.0), 0.0, -math.sqrt(2.0)], atol=1e-15)


# -- whole numbers and tuples ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["chain", "rigid_chain"])
@pytest.mark.parametrize("links", [2.5, "abc", True, 0, -3])
def test_links_must_be_a_whole_number(name, links) -> None:
    """links=2.5 raised TypeError ('float' object cannot be interpreted as an integer), 'abc' a str/int
    comparison, True built one link."""
    _refused(name, f"{name}: links must be a whole number >= 1, got {links!r}", links=links)


@pytest.mark.parametrize("name, body", [("chain", "bob"), ("rigid_chain", "link")])
def test_numpy_integer_links_build_that_many(name, body) -> None:
    built = scene(name).build(links=np.int64(3))
    assert sorted(b.name for b in built.bodies if b.name.startswith(body)) == [
        f"{body}{i}" for i in ((1, 2, 3) if name == "chain" else (0, 1, 2))
    ]


@pytest.mark.parametrize("size", [0.3, "abc", (0.3, 0.2), (0.3, 0.2, -0.05), (0.3, 0.2, math.nan), (0.3, True, 0.05)])
def test_dzhanibekov_size_must_be_three_lengths(size) -> None:
    """--param size=0.3 gave "'float' object is not iterable"."""
    _refused(
        "dzhanibekov",
        "dzhanibekov: size must be 3 lengths, the box's edges along body x, y, z in metres, each positive "
        f"(on the command line: --param 'size=(0.3,0.2,0.05)'), got {size!r}",
        size=size,
    )


def test_dzhanibekov_takes_a_list_or_an_array_of_edges() -> None:
    for size in ([0.3, 0.2, 0.05], np.array([0.3, 0.2, 0.05])):
        box = scene("dzhanibekov").build(size=size).body("box")
        mass = 700.0 * 0.3 * 0.2 * 0.05
        np.testing.assert_allclose(box.mass, mass, rtol=1e-14)
        np.testing.assert_allclose(box.principal_inertia, mass / 12 * np.array([0.0425, 0.0925, 0.13]), rtol=1e-12)


# -- four_bar: dead points -------------------------------------------------------------------------------


def test_a_four_bar_at_a_dead_point_is_refused_by_name() -> None:
    """crank=0.5, rocker=0.5, theta=0 put the coupler and the rocker in line: numpy's 'Singular matrix'."""
    _refused(
        "four_bar",
        "four_bar: at theta = 0 rad the coupler (1 m) and the rocker (0.5 m) lie in line (crank 0.5 m, ground "
        "1 m; sin of the transmission angle 0): the linkage is at a dead point, where the coupler's and rocker's "
        "rates are undetermined; choose another theta or other lengths",
        crank=0.5,
        rocker=0.5,
        theta=0.0,
    )
    _refused(
        "four_bar",
        "four_bar: at crank angle 0 rad the crank pin B lies on the rocker pivot D (crank 1 m = ground 1 m): the "
        "linkage cannot be assembled there; choose another theta",
        crank=1.0,
        theta=0.0,
    )


def test_a_four_bar_near_a_dead_point_still_closes_its_loop() -> None:
    """Away from it (theta = 0.01), the velocity analysis holds: the coupler's and rocker's ends move together."""
    built = scene("four_bar").build(crank=0.5, rocker=0.5, theta=0.01)
    C = scene("four_bar").positions(0.5, 1.0, 0.5, 1.0, 0.01)["C"]
    coupler, rocker = built.body("coupler"), built.body("rocker")
    v_c = coupler.velocity + np.cross(coupler.angular_velocity, C - coupler.position)
    v_r = rocker.velocity + np.cross(rocker.angular_velocity, C - rocker.position)
    np.testing.assert_allclose(v_c, v_r, atol=1e-9 * np.linalg.norm(v_c))
    assert np.linalg.norm(v_c) > 0


# -- driven_oscillator: through the anchor ---------------------------------------------------------------


def test_a_driven_oscillator_whose_steady_amplitude_reaches_the_anchor_is_refused() -> None:
    """damping=0.2, omega=2: A = 2.5 m past the 1 m rest length; the run went through the anchor and gave
    A = 0.36 m, without a word."""
    _refused(
        "driven_oscillator",
        "driven_oscillator: the steady amplitude A = 2.5 m (amplitude 1 N at omega 2 rad/s, damping 0.2 N s/m) "
        "reaches the spring's anchor: rest_length L₀ = 1 m, so the particle would pass through it and the run "
        "would give another motion; use a rest_length larger than 2.5 m",
        damping=0.2,
        omega=2.0,
    )


def test_with_room_the_driven_oscillator_reaches_the_closed_form_amplitude() -> None:
    oscillator = scene("driven_oscillator")
    A, _ = oscillator.steady_state(damping=0.2, omega=2.0)
    assert A == pytest.approx(2.5, rel=1e-12)
    run = mbvi.simulate(oscillator.build(damping=0.2, omega=2.0, rest_length=10.0), 150.0, 1e-2, "verlet")
    x = run.position("mass")[:, 0]
    late = run.t > 100.0  # the transient e^(−0.1 t) down to 5e-5
    fit = np.linalg.lstsq(np.column_stack([np.cos(2 * run.t[late]), np.sin(2 * run.t[late])]), x[late] - 10.0,
                          rcond=None)[0]  # fmt: skip
    assert math.hypot(*fit) == pytest.approx(2.5, rel=0.01)
    assert x.min() > 0  # never through the anchor


def test_a_transient_that_reaches_the_anchor_is_refused_and_its_closest_approach_is_the_motions() -> None:
    """Lightly damped and off resonance, from rest the drive beats: u reaches −1.125 m though A = 0.571 m."""
    oscillator = scene("driven_oscillator")
    low = oscillator.closest_approach(damping=0.01, omega=1.5)
    _refused(
        "driven_oscillator",
        f"driven_oscillator: starting from u0 = 0 m, v0 = 0 m/s the motion reaches u = {low:.4g} m before it "
        "settles to the steady amplitude A = 0.5714 m: past the spring's anchor (rest_length L₀ = 1 m), where "
        f"the run would give another motion; use a rest_length larger than {-low:.4g} m, or start nearer the "
        "steady motion",
        damping=0.01,
        omega=1.5,
    )
    run = mbvi.simulate(oscillator.build(damping=0.01, omega=1.5, rest_length=2.0), 20.0, 2e-3, "verlet")
    u = run.position("mass")[:, 0] - 2.0
    assert u.min() == pytest.approx(low, abs=1e-4)  # the first beat is the deepest
    assert low == pytest.approx(-1.12513, abs=1e-5)


# -- the texts' numbers ----------------------------------------------------------------------------------


def test_axial_beam_t_end_spans_the_periods_its_comment_says() -> None:
    """The comment said T_END = 1.6 ms was ≈ 4 periods of the fundamental; the period 4L/c is 0.773 ms."""
    beam = scene("axial_beam")
    period = 4 * 1.0 / mbvi.Beam("b", (0, 0, 0), (1, 0, 0), 4, density=7850.0, area=1e-4,
                                 youngs_modulus=2.1e11).wave_speed  # fmt: skip
    assert period == pytest.approx(0.773e-3, rel=1e-3)
    source = (SCENES / "axial_beam.py").read_text()
    claim = re.search(r"≈ (\d+) periods of the fundamental", source)
    assert claim, "the comment on T_END names its periods"
    assert int(claim.group(1)) == round(beam.T_END / period)


def test_spin_up_midpoint_agrees_with_verlet_as_its_docstring_says() -> None:
    """It said midpoint at 1e-3 s agrees with verlet at 2e-4 s 'to 1e-7 m in the lag'; at t = 8 s they differ
    by 2.2e-6 m."""
    spin_up = scene("spin_up")
    text = " ".join(spin_up.__doc__.split())
    claims = {float(t): float(d) for d, t in re.findall(r"(\d\.\d+e-\d+) m at t = (\d+) s", text)}
    assert sorted(claims) == [2.0, 5.0, 8.0], text

    def lag(run: mbvi.Trajectory) -> np.ndarray:
        tip, R = run.position("blade[10]"), run.rotation("hub")
        across = np.einsum("nji,nj->ni", R, tip)[:, 1]  # the tip in the hub's frame: across its x axis
        return np.array([across[np.argmin(np.abs(run.t - t))] for t in sorted(claims)])

    midpoint = mbvi.simulate(spin_up.build(), 8.0, 1e-3, "midpoint", save_every=10)
    verlet = mbvi.simulate(spin_up.build(), 8.0, 2e-4, "verlet", save_every=50)
    difference = np.abs(lag(midpoint) - lag(verlet))
    np.testing.assert_allclose(difference, [claims[t] for t in sorted(claims)], rtol=0.05)


# -- the command line: one line naming the parameter ----------------------------------------------------


@pytest.mark.parametrize(
    "file, params, says",
    [
        ("spinning_top.py", ["steady=false"], "spinning_top: steady must be True or False, got 'false'"),
        ("chain.py", ["links=abc"], "chain: links must be a whole number >= 1, got 'abc'"),
        ("dzhanibekov.py", ["size=0.3"], "dzhanibekov: size must be 3 lengths"),
        ("hanging_chain.py", ["span=0"], "hanging_chain: span must be a positive number of metres, got 0"),
        ("four_bar.py", ["crank=0.5", "rocker=0.5", "theta=0"], "the linkage is at a dead point"),
        ("damped_pendulum.py", ["g=-1"], "damped_pendulum: g must be a positive number"),
    ],
)
def test_the_command_line_names_the_parameter_in_one_line(file, params, says, tmp_path, capsys) -> None:
    argv = ["run", str(SCENES / file), "--t-end", "0.01", "--out", str(tmp_path / "o.npz")]
    for p in params:
        argv += ["--param", p]
    assert main(argv) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mbvi: error: ") and says in lines[0], lines
