"""mbvi — multibody mechanics with variational integrators.

Build a :class:`Scene` of bodies, joints and forces, :func:`simulate` it with
any registered integrator, compute static :func:`equilibrium` states, and
render with :mod:`mbvi.render` (imported lazily, with PyVista, on first use).

Every public name is loaded on first access (PEP 562), so ``import mbvi`` costs
almost nothing and imports neither SciPy nor networkx until a name needs them.
To export a new name, add it to ``_EXPORTS`` (name → defining module), to
``__all__`` and to the ``TYPE_CHECKING`` block — never import it eagerly here.
"""

import importlib as _importlib
import sys as _sys
import types as _types
import typing as _typing

if _typing.TYPE_CHECKING:  # for type checkers and the API docs; never executed
    from mbvi import cli, plot, render  # noqa: F401
    from mbvi.assembly import assemble
    from mbvi.batch import simulate_batch
    from mbvi.beam import Beam
    from mbvi.bodies import Particle, RigidBody
    from mbvi.checks import check_force_law, check_gradient, check_jacobian
    from mbvi.engine.contract import Kernel
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
    from mbvi.integrators.rattle import Composition
    from mbvi.joints import Fixed, Joint, Prismatic, Revolute, Rod, Spherical
    from mbvi.lagrangian import LagrangianSystem
    from mbvi.loads import StateView
    from mbvi.plugins import PluginError, force_laws, get_force_law, get_integrator, integrators
    from mbvi.scene import Scene
    from mbvi.shapes import Box, Capsule, Cylinder, Shape, Sphere
    from mbvi.simulate import simulate
    from mbvi.simulator import Simulator
    from mbvi.state import State
    from mbvi.statics import Equilibrium, SaddleWarning, equilibrium, modes
    from mbvi.sweep import sweep
    from mbvi.system import System
    from mbvi.trajectory import Trajectory

from mbvi._version import __version__

#: public name → module that defines it (a module itself when the name is a submodule)
_EXPORTS: dict[str, str] = {
    "assemble": "mbvi.assembly",
    "simulate_batch": "mbvi.batch",
    "Beam": "mbvi.beam",
    "Particle": "mbvi.bodies",
    "RigidBody": "mbvi.bodies",
    "check_force_law": "mbvi.checks",
    "check_gradient": "mbvi.checks",
    "check_jacobian": "mbvi.checks",
    "ConstraintWarning": "mbvi.errors",
    "RedundantConstraintWarning": "mbvi.errors",
    "SolverError": "mbvi.errors",
    "SaddleWarning": "mbvi.statics",
    "ForceLaw": "mbvi.forcelaws.base",
    "Damper": "mbvi.forces",
    "Drag": "mbvi.forces",
    "ExternalForce": "mbvi.forces",
    "ExternalTorque": "mbvi.forces",
    "Force": "mbvi.forces",
    "Gravity": "mbvi.forces",
    "JointDamping": "mbvi.forces",
    "Spring": "mbvi.forces",
    "TorsionSpring": "mbvi.forces",
    "hookimpl": "mbvi.hookspecs",
    "hookspec": "mbvi.hookspecs",
    "Integrator": "mbvi.integrators.base",
    "Composition": "mbvi.integrators.rattle",
    "Kernel": "mbvi.engine.contract",
    "Fixed": "mbvi.joints",
    "Joint": "mbvi.joints",
    "Prismatic": "mbvi.joints",
    "Revolute": "mbvi.joints",
    "Rod": "mbvi.joints",
    "Spherical": "mbvi.joints",
    "LagrangianSystem": "mbvi.lagrangian",
    "StateView": "mbvi.loads",
    "PluginError": "mbvi.plugins",
    "force_laws": "mbvi.plugins",
    "get_force_law": "mbvi.plugins",
    "get_integrator": "mbvi.plugins",
    "integrators": "mbvi.plugins",
    "Scene": "mbvi.scene",
    "Box": "mbvi.shapes",
    "Capsule": "mbvi.shapes",
    "Cylinder": "mbvi.shapes",
    "Shape": "mbvi.shapes",
    "Sphere": "mbvi.shapes",
    "simulate": "mbvi.simulate",
    "Simulator": "mbvi.simulator",
    "State": "mbvi.state",
    "Equilibrium": "mbvi.statics",
    "equilibrium": "mbvi.statics",
    "modes": "mbvi.statics",
    "sweep": "mbvi.sweep",
    "System": "mbvi.system",
    "Trajectory": "mbvi.trajectory",
    # submodules (listed in _SUBMODULES too)
    "cli": "mbvi.cli",
    "plot": "mbvi.plot",
    "plugins": "mbvi.plugins",
    "render": "mbvi.render",
}
__all__ = [
    "Beam",
    "Box",
    "Capsule",
    "Composition",
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
    "Kernel",
    "LagrangianSystem",
    "Particle",
    "PluginError",
    "Prismatic",
    "RedundantConstraintWarning",
    "Revolute",
    "RigidBody",
    "Rod",
    "SaddleWarning",
    "Scene",
    "Shape",
    "Simulator",
    "SolverError",
    "Sphere",
    "Spherical",
    "Spring",
    "State",
    "StateView",
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
    "sweep",
]
#: public names that are submodules; every other name of ``_EXPORTS`` is an object of its module
_SUBMODULES = frozenset({"cli", "plot", "plugins", "render"})


def _resolve(name: str) -> object:
    module = _importlib.import_module(_EXPORTS[name])
    return module if name in _SUBMODULES else getattr(module, name)


class _Package(_types.ModuleType):
    """The ``mbvi`` package: public names resolved on first access.

    Importing a submodule binds it on its package (``import mbvi.simulate`` sets
    ``mbvi.simulate``). Where a public object shares a submodule's name
    (the functions ``mbvi.simulate`` and ``mbvi.integrators``), that binding is
    skipped (the object is resolved on first access), so the public name never turns into a module,
    whatever imported it first.
    """

    def __getattr__(self, name: str) -> object:
        if name in _EXPORTS:
            value = _resolve(name)
            super().__setattr__(name, value)
            return value
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

    def __setattr__(self, name: str, value: object) -> None:
        if isinstance(value, _types.ModuleType) and name in _EXPORTS and name not in _SUBMODULES:
            return  # keep the public object; __getattr__ resolves it on first access
        super().__setattr__(name, value)

    def __dir__(self) -> list[str]:
        dunders = [k for k in vars(self) if k.startswith("__") and k.endswith("__")]
        loaded = [k for k, v in vars(self).items() if isinstance(v, _types.ModuleType) and not k.startswith("_")]
        return sorted(set(__all__) | _SUBMODULES | set(dunders) | set(loaded))

    def __reduce__(self) -> tuple:
        """Pickled by name, as a plain module is: a function pickled by value that reads ``mbvi.…`` (a sweep's
        ``build`` defined in a script or a notebook, sent to Dask's processes or a cluster) refers to the
        importing process's ``mbvi`` (cloudpickle knows modules by their exact type, not this subclass)."""
        return (_importlib.import_module, (self.__name__,))


_sys.modules[__name__].__class__ = _Package
