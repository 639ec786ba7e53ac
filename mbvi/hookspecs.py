"""Every hook mbvi calls, in one place (pytest's ``hookspec.py`` way).

Plugins implement these with :data:`hookimpl` in a module or package that
declares an entry point in the group ``mbvi``::

    [project.entry-points.mbvi]
    leapfrog = "mbvi_leapfrog"

Built-in integrators and force laws are registered through these same hooks.
"""

from __future__ import annotations

from collections.abc import Callable

import pluggy

__all__ = ["hookimpl", "hookspec", "register_force_laws", "register_integrators"]

PROJECT = "mbvi"

#: marker for hook specifications (mbvi's own use)
hookspec = pluggy.HookspecMarker(PROJECT)
#: marker plugins use for their hook implementations
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def register_integrators(register: Callable[[type], None]) -> None:
    """Register integrator classes.

    Called once, when the registry is first used (``mbvi.integrators()``,
    ``mbvi.simulate``). Call ``register(cls)`` for every
    :class:`mbvi.Integrator` subclass the plugin provides; ``cls.name`` must be
    unique among all registered integrators. The return value is ignored.

    Parameters
    ----------
    register : callable
        ``register(cls)`` validates ``cls`` and adds it to the registry; it
        raises :class:`mbvi.PluginError` for a duplicate name or an invalid class.
    """


@hookspec
def register_force_laws(register: Callable[[type], None]) -> None:
    """Register force-law classes.

    Called once, when the registry is first used (``mbvi.force_laws()``,
    assembly of a scene). Call ``register(cls)`` for every
    :class:`mbvi.ForceLaw` subclass; ``cls.name`` must be unique and
    ``cls.element`` names the force element class the law evaluates. The
    return value is ignored.

    Parameters
    ----------
    register : callable
        ``register(cls)`` validates ``cls`` and adds it to the registry.
    """
