"""The NumPy methods of a force law that gives a role only in its compiled form (mbvi.lawmethods).

A plugin law that gives its force only as the engine's families (a ``point_force`` pull, a ``spring`` tether)
and writes no NumPy method was a zero force on the NumPy paths: ``explicit_euler`` and ``csm`` fell freely,
``equilibrium`` found no balance, the energies left its potential out. Its methods now evaluate the families —
the force and ∇U by the compiled loop's own code, U by the families' formulas, checked here against the
built-in laws that give the same families and against closed forms.
"""

from __future__ import annotations

import math
import types

import numpy as np
import pytest

import mbvi
from mbvi.engine.contract import Family
from mbvi.kernels import AffineMap
from mbvi.lawmethods import numpy_methods

G = 9.81


class _Tether(mbvi.Force):
    """A particle held at the origin by a zero-length spring of stiffness k and pulled by a constant force f."""

    def __init__(self, body: str, k: float, pull: tuple) -> None:
        self.explicit_name, self.name = False, f"family-tether:{body}"
        self.body, self.bodies, self.k, self.pull = body, (body,), float(k), np.asarray(pull, float)


class _TetherLaw(mbvi.ForceLaw):
    """Gives its spring and its pull only as families, its earlier ``{family: arrays}`` form or a list."""

    name = "family_tether"
    element = _Tether
    has_potential = has_force = True
    form = "list"

    def compiled(self):
        P = AffineMap.from_terms([self.layout.point(e.body, np.zeros(3)) for e in self.elements], self.nq)
        n = len(self.elements)
        spring = (P.terms, np.array([e.k for e in self.elements]), np.zeros(n))
        pull = (P.terms, np.array([e.pull for e in self.elements]))
        if self.form == "dict":
            return {"spring": spring, "point_force": pull}
        return [Family("spring", spring), Family("point_force", pull)]


def _registered(law: type):
    module = types.ModuleType(f"test_law_methods_{law.__name__}")
    module.register_force_laws = mbvi.hookimpl(lambda register: [register(law)])
    return module


@pytest.mark.parametrize("form", ["list", "dict"])
def test_a_law_given_only_as_families_is_the_same_force_on_every_path(form: str) -> None:
    """Closed forms for m ẍ = −k x + f + m g: x(t) = x* + (x₀ − x*) cos ωt about x* = (f + m g)/k, ω² = k/m; the
    run's energy ½ m v² + ½ k |x|² − m g·x (the pull is a non-conservative load: its work is the energy's change);
    the equilibrium x*."""
    k, m, pull = 4.0, 1.0, (2.0, 0.0, 0.0)
    law = type(f"TetherLaw_{form}", (_TetherLaw,), {"form": form, "name": f"family_tether_{form}"})
    element = type(f"Tether_{form}", (_Tether,), {})
    law.element = element
    plugin = _registered(law)
    mbvi.plugins.register_plugin(plugin)
    try:
        scene = mbvi.Scene(gravity=(0.0, 0.0, -G))
        scene.add(mbvi.Particle("p", mass=m, position=(0.1, 0.0, 0.0)))
        scene.add(element("p", k, pull))
        w = math.sqrt(k / m)
        rest = (np.array(pull) + m * np.array([0.0, 0.0, -G])) / k
        exact = rest + (np.array([0.1, 0.0, 0.0]) - rest) * math.cos(w)
        for integrator, tol in (("verlet", 1e-5), ("csm", 1e-6), ("explicit_euler", 5e-3)):
            traj = mbvi.simulate(scene, 1.0, 1e-3, integrator)
            np.testing.assert_allclose(traj.position("p")[-1], exact, atol=tol, err_msg=integrator)
        traj = mbvi.simulate(scene, 1.0, 1e-3, "csm")
        x, v = traj.position("p"), traj.velocity("p")
        by_hand = 0.5 * m * np.sum(v**2, axis=1) + 0.5 * k * np.sum(x**2, axis=1) + m * G * x[:, 2]
        np.testing.assert_allclose(traj.energy, by_hand, atol=1e-9)
        np.testing.assert_allclose(mbvi.equilibrium(scene).position("p"), rest, atol=1e-9)
    finally:
        mbvi.plugins.unregister_plugin(plugin)


def _builtin_scene() -> mbvi.Scene:
    """Gravity, a spring between particles, a torsion spring on a hinge and a bending beam: every family of the
    gradient role, given by the built-in laws."""
    scene = mbvi.Scene(gravity=(0.0, 0.0, -G))
    scene.add(mbvi.Particle("a", mass=1.0, position=(0.0, 0.0, 0.0)))
    scene.add(mbvi.Particle("b", mass=2.0, position=(1.0, 0.2, 0.0)))
    scene.add(mbvi.Spring("a", "b", stiffness=30.0, rest_length=0.7))
    scene.add(mbvi.RigidBody("arm", mass=1.0, inertia=(0.1, 0.1, 0.1), position=(0.0, 0.0, -1.0)))
    scene.add(mbvi.Revolute("world", "arm", anchor=(0.0, 0.0, 0.0), axis=(0.0, 1.0, 0.0), name="hinge"))
    scene.add(mbvi.TorsionSpring("hinge", stiffness=5.0, rest_angle=0.3))
    scene.add(mbvi.Beam("beam", start=(0, 2, 0), end=(1, 2, 0), segments=3, density=10.0, area=1e-2,
                        youngs_modulus=1e5, second_moment=1e-6))  # fmt: skip
    return scene


def test_the_families_potential_and_gradient_are_the_builtin_laws() -> None:
    """Each built-in conservative law that gives its potential as a family: U and ∇U of its families, evaluated
    as a plugin's would be, equal the law's own NumPy methods at configurations away from the initial one (the
    torsion spring turned, the beam bent, the spring stretched)."""
    system = mbvi.assemble(_builtin_scene())
    rng = np.random.default_rng(3)
    seen = set()
    for law in system.laws:
        parts = law.compiled()
        parts = [Family(n, a) for n, a in parts.items()] if isinstance(parts, dict) else parts
        parts = parts if isinstance(parts, list) else [parts]
        families = [p for p in parts if isinstance(p, Family)]
        if not law.has_potential or not families:
            continue
        seen |= {f.name for f in families}
        methods = numpy_methods(["potential", "gradient"], families, system.nq)
        for _ in range(3):
            q = system.layout.q0 + 0.05 * rng.standard_normal(system.nq)
            assert methods["potential"](q) == pytest.approx(float(law.potential(q)), rel=1e-12, abs=1e-12)
            np.testing.assert_allclose(methods["gradient"](q), law.gradient(q), rtol=1e-10, atol=1e-10)
    assert seen >= {"gravity", "spring", "torsion_spring", "bending"}
