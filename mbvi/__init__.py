"""mbvi — multibody mechanics with variational integrators.

Build a :class:`Scene` of bodies, joints and forces, :func:`simulate` it with
any registered integrator, compute static :func:`equilibrium` states, and
render with :mod:`mbvi.render` (imported lazily, with PyVista, on first use).
"""

from __future__ import annotations

import importlib
from typing import Any

from mbvi.assembly import assemble
from mbvi.batch import simulate_batch
from mbvi.beam import Beam
from mbvi.bodies import Particle, RigidBody
from mbvi.checks import check_force_law, check_gradient, check_jacobian
from mbvi.errors import ConstraintWarning, RedundantConstraintWarning, SolverError
from mbvi.forcelaws.base import ForceLaw
from mbvi.forces import (
    Damper,
    Drag,
    ExternalForce,
    ExternalTorque,
    Force,
    Gravity,
    JointDamping,
    Spring,
    TorsionSpring,
)
from mbvi.hookspecs import hookimpl, hookspec
from mbvi.integrators.base import Integrator
from mbvi.joints import Fixed, Joint, Prismatic, Revolute, Rod, Spherical
from mbvi.plugins import PluginError, force_laws, get_force_law, get_integrator, integrators
from mbvi.scene import Scene
from mbvi.shapes import Box, Capsule, Cylinder, Shape, Sphere
from mbvi.simulate import simulate
from mbvi.state import State
from mbvi.statics import Equilibrium, equilibrium, modes
from mbvi.system import System
from mbvi.trajectory import Trajectory

__version__ = "0.1.0"

__all__ = [
    "Beam",
    "Box",
    "Capsule",
    "ConstraintWarning",
    "Cylinder",
    "Damper",
    "Drag",
    "Equilibrium",
    "ExternalForce",
    "ExternalTorque",
    "Fixed",
    "Force",
    "ForceLaw",
    "Gravity",
    "Integrator",
    "Joint",
    "JointDamping",
    "Particle",
    "PluginError",
    "Prismatic",
    "RedundantConstraintWarning",
    "Revolute",
    "RigidBody",
    "Rod",
    "Scene",
    "Shape",
    "SolverError",
    "Sphere",
    "Spherical",
    "Spring",
    "State",
    "System",
    "TorsionSpring",
    "Trajectory",
    "__version__",
    "assemble",
    "check_force_law",
    "check_gradient",
    "check_jacobian",
    "equilibrium",
    "force_laws",
    "get_force_law",
    "get_integrator",
    "hookimpl",
    "hookspec",
    "integrators",
    "modes",
    "plot",
    "render",
    "simulate",
    "simulate_batch",
]

_LAZY = {"render": "mbvi.render", "plot": "mbvi.plot", "cli": "mbvi.cli"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module = importlib.import_module(_LAZY[name])
        globals()[name] = module
        return module
    raise AttributeError(f"module 'mbvi' has no attribute {name!r}")
