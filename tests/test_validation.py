"""Issue 11: every failure a clear error — the package namespace, light import and input validation."""

from __future__ import annotations

import subprocess
import sys
import types

import numpy as np
import pytest

import mbvi

HEAVY = ("pyvista", "matplotlib", "sympy", "dask", "xarray", "vtk")


# -- namespace and import ---------------------------------------------------------------------------
def test_namespace_holds_only_public_names_dunders_and_submodules() -> None:
    for name in mbvi.__all__:
        assert getattr(mbvi, name) is not None
    for leak in ("Any", "annotations", "importlib"):
        assert not hasattr(mbvi, leak), f"mbvi.{leak} leaks from mbvi/__init__.py"
    for name in dir(mbvi):
        public = name in mbvi.__all__
        dunder = name.startswith("__") and name.endswith("__")
        submodule = isinstance(getattr(mbvi, name), types.ModuleType)
        assert public or dunder or submodule, f"dir(mbvi) shows {name!r}"
    assert {"render", "plot", "cli"} <= set(dir(mbvi))


def test_public_functions_stay_functions_whatever_imported_their_module_first() -> None:
    code = (
        "import mbvi, mbvi.simulate, mbvi.integrators.base, mbvi.statics\n"
        "assert callable(mbvi.simulate) and callable(mbvi.integrators) and callable(mbvi.equilibrium)\n"
        "assert 'verlet' in mbvi.integrators()\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_import_is_light() -> None:
    code = (
        "import sys, time\n"
        "t0 = time.perf_counter()\n"
        "import mbvi\n"
        "dt = time.perf_counter() - t0\n"
        f"print(dt, [m for m in {HEAVY!r} if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout.split(" ", 1)
    print(f"import mbvi: {float(out[0]):.3f} s")  # measured, not asserted (shared CI machines)
    assert out[1].strip() == "[]", f"import mbvi imports {out[1].strip()}"


def test_first_use_does_not_import_rendering_or_plotting() -> None:
    code = (
        "import sys, mbvi\n"
        "s = mbvi.Scene()\n"
        "s.add(mbvi.Particle('a', mass=1.0, position=(1, 0, 0)))\n"
        "s.add(mbvi.Rod('world', 'a'))\n"
        "mbvi.assemble(s).initial_state()\n"
        "print([m for m in ('pyvista', 'matplotlib', 'sympy', 'dask', 'xarray') if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "[]"


# -- input validation: ValueError naming the element ------------------------------------------------
def _two_particles() -> mbvi.Scene:
    scene = mbvi.Scene()
    scene.add(mbvi.Particle("a", mass=1.0, position=(1.0, 0.0, 0.0)))
    scene.add(mbvi.Particle("b", mass=1.0, position=(2.0, 0.0, 0.0)))
    return scene


@pytest.mark.parametrize(
    ("make", "needles"),
    [
        (lambda: mbvi.RigidBody("r", mass=1.0, inertia="diag"), ["RigidBody 'r'", "inertia"]),
        (lambda: mbvi.Particle("p", mass="1.0"), ["Particle 'p'", "mass"]),
        (lambda: mbvi.Particle("p", mass=True), ["Particle 'p'", "mass"]),
        (lambda: mbvi.RigidBody("r", mass=True, inertia=(1, 1, 1)), ["RigidBody 'r'", "mass"]),
        (lambda: mbvi.Sphere("0.1"), ["Sphere", "radius"]),
        (lambda: mbvi.Cylinder(0.1, "1.0"), ["Cylinder", "length"]),
        (lambda: mbvi.Box(("1", 1, 1)), ["Box", "size"]),
        (lambda: mbvi.RigidBody("r", shape=mbvi.Sphere(1e308), density=1.0), ["RigidBody 'r'", "representable"]),
        (lambda: mbvi.Particle("p", mass=1.0, position=(1, 0, 0), velocity=(1e300, 0, 0)), ["Particle 'p'", "energy"]),
        (lambda: mbvi.Particle("p", mass=1.0, position=(1e200, 0, 0)), ["Particle 'p'", "position"]),
        (
            lambda: mbvi.RigidBody("r", mass=1.0, inertia=(1, 1, 1), angular_velocity=(1e200, 0, 0)),
            ["RigidBody 'r'", "energy"],
        ),
        (lambda: _two_particles().add(mbvi.Spring("a", "a", stiffness=1.0)), ["Spring", "itself"]),
        (lambda: _two_particles().add(mbvi.Spring("world", "world", stiffness=1.0)), ["Spring", "itself"]),
        (lambda: _two_particles().add(mbvi.Damper("b", "b", damping=1.0)), ["Damper", "itself"]),
        (lambda: _two_particles().add(mbvi.Drag("world", coefficient=1.0)), ["Drag", "world"]),
        (lambda: _two_particles().add(mbvi.ExternalForce("world", force=(1, 0, 0))), ["ExternalForce", "world"]),
        (lambda: _two_particles().add(mbvi.ExternalTorque("world", torque=(1, 0, 0))), ["ExternalTorque", "world"]),
    ],
)
def test_bad_input_is_a_value_error_naming_the_element(make, needles) -> None:
    with pytest.raises(ValueError) as info:
        make()
    for needle in needles:
        assert needle in str(info.value)


def test_numbers_from_numpy_are_accepted() -> None:
    p = mbvi.Particle("p", mass=np.float32(2.0), position=np.array([1, 0, 0]), velocity=[np.int64(1), 0.0, 0])
    assert p.mass == 2.0
    assert mbvi.Sphere(np.float64(0.5)).radius == 0.5
    assert isinstance(mbvi.Cylinder(1, 2).length, float)


def _hanging_sphere(radius: float, density: float) -> mbvi.Scene:
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.RigidBody("r", shape=mbvi.Sphere(radius), density=density, position=(0.0, 0.0, -2 * radius)))
    scene.add(mbvi.Spherical("world", "r", anchor=(0.0, 0.0, 0.0)))
    return scene


def test_modes_count_is_checked() -> None:
    with pytest.raises(ValueError, match="count"):
        mbvi.modes(_hanging_sphere(0.1, 1000.0), count=-1)


@pytest.mark.parametrize("radius", [0.1, 1e6])
def test_modes_of_large_bodies_are_scale_free(radius: float) -> None:
    """A sphere of radius R on a ball joint at 2R above its centre: two pendulum modes with
    ω² = m g d / (J + m d²), d = 2R, J = 0.4 m R² (scipy failed for R = 1e6, density 1e-6)."""
    omega, shapes = mbvi.modes(_hanging_sphere(radius, 1e-6 if radius > 1 else 1000.0))
    d = 2 * radius
    expected = np.sqrt(9.81 * d / (0.4 * radius**2 + d**2))
    np.testing.assert_allclose(np.sort(np.abs(omega))[-2:], [expected, expected], rtol=1e-6)
    assert np.all(np.isfinite(shapes))


def test_a_bad_density_names_the_body_once() -> None:
    """The density check already names the body; the shape's error handler prefixed it a second time
    ("RigidBody 'b': RigidBody 'b': density must be positive")."""
    with pytest.raises(ValueError) as info:
        mbvi.RigidBody("b", shape=mbvi.Sphere(0.1), density=-1.0)
    assert str(info.value) == "RigidBody 'b': density must be positive, got -1.0"
    with pytest.raises(ValueError) as info:  # the shape's own message gets the body's name, once
        mbvi.RigidBody("b", shape=mbvi.Sphere(1e308), density=1.0)
    assert str(info.value).startswith("RigidBody 'b': Sphere(radius=1e+308) with density 1 kg/m³: mass inf kg")


def test_bools_are_not_coordinates() -> None:
    """NumPy turns (True, 0, 0) into (1, 0, 0); a scalar bool was refused, now a bool in a vector is too."""
    with pytest.raises(ValueError, match=r"^ExternalForce 'push': force must be 3 numbers, got \(True, 0, 0\)$"):
        mbvi.ExternalForce("a", force=(True, 0, 0), name="push")
    with pytest.raises(ValueError, match=r"^Particle 'p': position must be 3 numbers"):
        mbvi.Particle("p", mass=1.0, position=[0.0, [False], 1.0])


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"tol": "1e-9"}, "equilibrium: tol must be a positive finite number, got '1e-9'"),
        ({"tol": 0.0}, "equilibrium: tol must be a positive finite number, got 0.0"),
        ({"tol": float("nan")}, "equilibrium: tol must be a positive finite number, got nan"),
        ({"maxiter": 0}, "equilibrium: maxiter must be a positive integer, got 0"),
        ({"maxiter": 2.5}, "equilibrium: maxiter must be a positive integer, got 2.5"),
        ({"maxiter": True}, "equilibrium: maxiter must be a positive integer, got True"),
        ({"t": "0"}, "equilibrium: t must be a finite number, got '0'"),
        ({"t": float("inf")}, "equilibrium: t must be a finite number, got inf"),
        ({"initial_state": "x"}, "equilibrium: initial_state must be an mbvi.State (or 12 coordinates)"),
        ({"initial_state": np.zeros(3)}, "equilibrium: initial_state must be an mbvi.State (or 12 coordinates)"),
        (
            {"initial_state": mbvi.State(np.full(12, np.nan), np.zeros(12))},
            "equilibrium: initial_state must be an mbvi.State (or 12 coordinates)",
        ),
        (  # rotation columns of zero length: no Newton step reaches the joints from there
            {"initial_state": mbvi.State(np.zeros(12), np.zeros(12))},
            "equilibrium: initial_state cannot be brought onto the constraints (Newton projection: residual",
        ),
    ],
)
def test_equilibrium_options_are_checked(kwargs, needle) -> None:
    """maxiter=0 used to end in an UnboundLocalError, tol='1e-9' in a TypeError, a wrong start in numpy's errors."""
    with pytest.raises(ValueError) as info:
        mbvi.equilibrium(_hanging_sphere(0.1, 1000.0), **kwargs)
    assert str(info.value).startswith(needle)


def test_modes_and_equilibrium_name_what_they_expected() -> None:
    expected = r"^modes: expected an mbvi.Scene or mbvi.LagrangianSystem, or the equilibrium of one, got str$"
    with pytest.raises(ValueError, match=expected):
        mbvi.modes("scene")
    with pytest.raises(ValueError, match=r"^equilibrium: expected an mbvi.Scene or mbvi.LagrangianSystem, got dict$"):
        mbvi.equilibrium({})


def test_an_initial_state_of_complex_or_text_values_is_refused_by_name() -> None:
    """A velocity of 5j ran from rest (its imaginary part dropped, with only numpy's ComplexWarning), in
    simulate, simulate_batch and a LagrangianSystem; text said only "could not convert string to float"."""
    import sympy as sp

    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.Particle("p", mass=1.0, position=(0.0, 0.0, 0.0)))
    q = np.zeros(3)
    complex_v = np.array([0.0, 5j, 0.0])
    with pytest.raises(ValueError, match="simulate: initial_state's v must be real numbers, got complex ones"):
        mbvi.simulate(scene, 0.1, 0.01, initial_state=mbvi.State(q, complex_v))
    with pytest.raises(ValueError, match="simulate: initial_state's q must be numbers"):
        mbvi.simulate(scene, 0.1, 0.01, initial_state=mbvi.State(["a"] * 3, q))
    with pytest.raises(ValueError, match=r"initial_states \(Q, V\) .* of real numbers \(V must be real numbers"):
        mbvi.simulate_batch(scene, 0.1, 0.01, initial_states=(q[None], complex_v[None]))
    with pytest.raises(ValueError, match="simulate_batch: initial state 1's v must be real numbers"):
        mbvi.simulate_batch(scene, 0.1, 0.01, initial_states=[mbvi.State(q, q), mbvi.State(q, [0, 0, 1 + 0j])])
    x, m = sp.Symbol("x"), 1.0
    L = m * sp.Symbol("xdot") ** 2 / 2 - m * x**2 / 2
    system = mbvi.LagrangianSystem(L, [x], [sp.Symbol("xdot")], initial_state=([1.0], [0.0]))
    with pytest.raises(ValueError, match="initial_state's v must be real numbers"):
        mbvi.simulate(system, 0.1, 0.01, initial_state=mbvi.State(np.array([1.0]), np.array([2j])))
