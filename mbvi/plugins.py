"""The plugin manager and the integrator / force-law registries.

One :class:`pluggy.PluginManager` holds mbvi's built-in plugins
(:data:`DEFAULT_PLUGINS`) and the packages that declare an entry point in the
group ``mbvi``. Nothing is loaded at ``import mbvi``: the registries are
filled on first use. Set the environment variable ``MBVI_DISABLE_PLUGINS=1``
to load only the built-ins, or ``MBVI_BLOCK_PLUGINS=name1,name2`` to skip
particular entry points.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
import os
import threading
from typing import Any

import pluggy

from mbvi import hookspecs

log = logging.getLogger("mbvi")

__all__ = [
    "DEFAULT_PLUGINS",
    "PluginError",
    "check_given_class",
    "force_law_for",
    "force_laws",
    "get_force_law",
    "get_integrator",
    "get_plugin_manager",
    "integrators",
    "register_plugin",
    "register_shipped",
    "reset",
    "run_time_plugins",
    "unregister_plugin",
]

#: built-in plugin modules, registered exactly like third-party plugins
DEFAULT_PLUGINS = (
    "mbvi.integrators.rattle",
    "mbvi.integrators.implicit",
    "mbvi.integrators.explicit",
    "mbvi.integrators.csm",
    "mbvi.forcelaws.builtin",
    "mbvi.beam",
)


class PluginError(RuntimeError, ValueError):
    """A plugin is invalid: a misspelt hook, a duplicate name, or a bad registered class.

    Also a ``ValueError``: the plugin's input is at fault, and its message names the plugin or the class.
    """


_lock = threading.RLock()
_pm: pluggy.PluginManager | None = None
_integrators: dict[str, type] | None = None
_force_laws: dict[str, type] | None = None


def _make_manager() -> pluggy.PluginManager:
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    for modname in DEFAULT_PLUGINS:
        pm.register(importlib.import_module(modname), name=modname)
    if os.environ.get("MBVI_DISABLE_PLUGINS", "").strip() not in ("", "0"):
        pm.check_pending()
        return pm
    blocked = {s.strip() for s in os.environ.get("MBVI_BLOCK_PLUGINS", "").split(",") if s.strip()}
    for ep in importlib.metadata.entry_points(group=hookspecs.PROJECT):
        if ep.name in blocked or pm.get_plugin(ep.name) is not None:
            continue
        try:
            plugin = ep.load()
        except Exception as exc:  # an entry point that fails to import
            raise PluginError(
                f"mbvi plugin {ep.name!r} ({ep.value}) failed to load: {type(exc).__name__}: {exc}; "
                f"set MBVI_BLOCK_PLUGINS={ep.name} to skip it"
            ) from exc
        try:
            pm.register(plugin, name=ep.name)
        except ValueError as exc:
            raise PluginError(f"mbvi plugin {ep.name!r} ({ep.value}) cannot be registered: {exc}") from exc
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        raise PluginError(f"invalid mbvi plugin: {exc}") from exc
    return pm


def get_plugin_manager() -> pluggy.PluginManager:
    """The plugin manager (created, with entry points loaded, on first call)."""
    global _pm
    with _lock:
        if _pm is None:
            _pm = _make_manager()
        return _pm


def register_plugin(plugin: Any, name: str | None = None) -> None:
    """Register a plugin object or module at run time (e.g. in tests) and refresh the registries.

    What it registers is checked now (classes, names, compositions' weights and bases): an invalid plugin — or
    one whose hooks raise — is a :class:`PluginError` naming the class, and is not kept, so that the registry
    stays usable. A plugin (or a name) already registered is refused and left registered as it was.
    """
    pm = get_plugin_manager()
    with _lock:
        if pm.is_registered(plugin) or (name is not None and pm.get_plugin(name) is not None):
            raise PluginError(
                f"mbvi plugin {name or plugin!r} is already registered (unregister_plugin it first to register it "
                "again)"
            )
        try:
            pm.register(plugin, name=name)
            pm.check_pending()
        except (ValueError, pluggy.PluginValidationError) as exc:
            if pm.is_registered(plugin):
                pm.unregister(plugin)
            raise PluginError(f"invalid mbvi plugin {name or plugin!r}: {exc}") from exc
        _invalidate()
        try:
            _integrator_registry()
            _force_law_registry()
        except Exception as exc:  # a PluginError, or a hook with a bug of its own: not kept either way
            pm.unregister(plugin)
            _invalidate()
            raise PluginError(f"invalid mbvi plugin {name or plugin!r}: {exc}") from None
        _run_time.append((pm.get_name(plugin), plugin))


def run_time_plugins() -> list[tuple[str, Any]]:
    """The plugins :func:`register_plugin` registered in this process and still registered, as (name, plugin):
    what a worker process (:func:`mbvi.sweep`) registers again, since it finds only the installed ones."""
    pm = get_plugin_manager()
    with _lock:
        _run_time[:] = [(n, p) for n, p in _run_time if pm.is_registered(p)]
        return list(_run_time)


def register_shipped(plugins: list[tuple[str, Any]]) -> None:
    """Register plugins another process registered at run time (:func:`run_time_plugins`) that are not here yet,
    by name."""
    pm = get_plugin_manager()
    for name, plugin in plugins:
        if pm.get_plugin(name) is None and not pm.is_registered(plugin):
            try:
                register_plugin(plugin, name=name)
            except PluginError as exc:  # e.g. the script registered its own copy here as it was imported again
                log.debug("a plugin registered at run time in the calling process is not registered here: %s", exc)


def unregister_plugin(plugin: Any = None, name: str | None = None) -> None:
    """Remove a plugin registered with :func:`register_plugin` (nothing to do when it is not registered: a
    plugin :func:`register_plugin` refused, a second teardown).

    A plugin that registers the base of a registered composition (of another plugin) is not removed: a
    :class:`PluginError` names the composition, and the registry stays as it was.
    """
    if isinstance(plugin, str) and name is None:  # unregister_plugin("name"): the name register_plugin was given
        plugin, name = None, plugin
    pm = get_plugin_manager()
    with _lock:
        if (plugin is not None and pm.is_registered(plugin)) or (plugin is None and pm.get_plugin(name) is not None):
            key = pm.get_name(plugin) if plugin is not None else name
            removed = pm.unregister(plugin, name=name)
            _invalidate()
            try:
                _integrator_registry()
            except PluginError as exc:  # a composition left without its base: put the plugin back
                pm.register(removed, name=key)
                _invalidate()
                raise PluginError(f"mbvi plugin {key!r} cannot be unregistered: {exc}") from None
        _invalidate()


#: (name, plugin) of what register_plugin registered (see run_time_plugins)
_run_time: list[tuple[str, Any]] = []


def _invalidate() -> None:
    global _integrators, _force_laws
    _integrators = _force_laws = None


def reset() -> None:
    """Forget the plugin manager and registries (they are rebuilt on next use)."""
    global _pm
    with _lock:
        _pm = None
        _invalidate()


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _collect(hook_name: str, check) -> dict[str, type]:
    registry: dict[str, type] = {}

    def register(cls: type) -> None:
        check(cls)
        if cls.name in registry and registry[cls.name] is not cls:
            raise PluginError(
                f"two plugins register {hook_name[9:-1]} {cls.name!r}: {_qualified(registry[cls.name])} "
                f"and {_qualified(cls)}"
            )
        registry[cls.name] = cls

    try:
        getattr(get_plugin_manager().hook, hook_name)(register=register)
    except PluginError:
        raise
    except Exception as exc:  # a hook with a bug of its own: named, and its traceback kept as the cause
        raise PluginError(f"{hook_name}: a plugin's hook raised {type(exc).__name__}: {exc}") from exc
    return registry


def _check_integrator(cls: Any, registering: bool = True) -> None:
    """A registered integrator class's checks (PluginError): a name (a registry's key; a class given to a run
    alone may leave it unset, ``registering=False``: the run records the class's own name) and a positive int
    order."""
    import numbers

    from mbvi.integrators.base import Integrator

    if not (isinstance(cls, type) and issubclass(cls, Integrator)):
        raise PluginError(f"register_integrators: {cls!r} is not an mbvi.Integrator subclass")
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or (registering and not name):
        raise PluginError(f"register_integrators: {cls.__qualname__} has no name: give it a class attribute "
                          f"name = \"...\" (a str; got {name!r})")  # fmt: skip
    order = getattr(cls, "order", None)
    if not isinstance(order, numbers.Integral) or isinstance(order, bool) or order < 1:
        raise PluginError(f"register_integrators: {cls.__qualname__}.order must be a positive int (the order of "
                          f"accuracy it promises), got {order!r}")  # fmt: skip


def _check_force_law(cls: Any) -> None:
    from mbvi.forcelaws.base import ForceLaw

    if not (isinstance(cls, type) and issubclass(cls, ForceLaw)):
        raise PluginError(f"register_force_laws: {cls!r} is not an mbvi.ForceLaw subclass")
    if not isinstance(getattr(cls, "name", None), str) or not cls.name:
        raise PluginError(f"register_force_laws: {cls.__qualname__} has no name")
    from mbvi.forces import Force

    element = getattr(cls, "element", None)
    if not (isinstance(element, type) and issubclass(element, Force)):  # (int was taken)
        raise PluginError(f"register_force_laws: {cls.__qualname__}.element must be the force element class (an "
                          f"mbvi.Force subclass), got {element!r}")  # fmt: skip


def _integrator_registry() -> dict[str, type]:
    global _integrators
    with _lock:
        if _integrators is None:
            registry = _collect("register_integrators", _check_integrator)
            for cls in registry.values():
                # (one bound already as another's base is not bound again: a second bind gave it a new scheme, and
                # the composition on it looked changed; one whose base this registry lacks is, and says so)
                if _is_composition(cls) and not (cls.bound() and registry.get(cls.base) is cls.__dict__.get(
                        "_bound_base")):  # fmt: skip
                    _bind(cls, registry)
            _integrators = registry
        return _integrators


def _is_composition(cls: type) -> bool:
    from mbvi.integrators.rattle import Composition

    return isinstance(cls, type) and issubclass(cls, Composition)


def _bind(cls: type, registry: dict[str, type], chain: tuple = ()) -> None:
    """Fix a composition's scheme from its base (bound first when it is a composition too), or PluginError."""

    def lookup(name: str) -> type:
        base = registry.get(name)
        if base is None:
            raise ValueError(f"unknown integrator {name!r}")
        if _is_composition(base) and not base.bound():
            if base in chain:
                raise ValueError(f"compositions {' → '.join(c.__qualname__ for c in (*chain, base))} form a loop")
            _bind(base, registry, (*chain, cls))
        return base

    try:
        cls.bind(lookup)
    except ValueError as exc:
        raise PluginError(f"register_integrators: {exc}") from None


def check_given_class(cls: type) -> None:
    """The checks registration makes, for an integrator class given to a run rather than registered (ValueError):
    a name, a positive int order, and a name that is not a built-in integrator's (a run records the name and the
    order as its method's; a subclass may keep the name of the class it extends, and a plugin's author may run
    their own version of an installed plugin's method under its name). A composition is then bound to its base."""
    try:
        _check_integrator(cls, registering=False)
        registry = _integrator_registry()
        other = registry.get(cls.name)
        if other is not None and other not in cls.__mro__ and other.__module__.startswith("mbvi."):
            raise PluginError(
                f"register_integrators: {cls.__qualname__}.name {cls.name!r} is the built-in integrator "
                f"{other.__qualname__}'s (a run records the name as its method's): give it a name of its own"
            )
        if _is_composition(cls) and not cls.bound():  # (bound again when changed since: a notebook)
            _bind(cls, registry)
    except PluginError as exc:
        raise ValueError(str(exc).removeprefix("register_integrators: ")) from None


def _force_law_registry() -> dict[str, type]:
    global _force_laws
    with _lock:
        if _force_laws is None:
            registry = _collect("register_force_laws", _check_force_law)
            owner: dict[type, type] = {}
            for law in registry.values():  # one law per element class: a second would be ignored, silently
                other = owner.setdefault(law.element, law)
                if other is not law:
                    raise PluginError(
                        f"register_force_laws: {_qualified(other)} and {_qualified(law)} both handle "
                        f"{law.element.__name__} elements (one law per element class: give yours an element of "
                        "its own, e.g. a subclass)"
                    )
            _force_laws = registry
        return _force_laws


def integrators() -> list[str]:
    """Names of every registered integrator (built-ins and plugins), sorted."""
    return sorted(_integrator_registry())


def force_laws() -> list[str]:
    """Names of every registered force law (built-ins and plugins), sorted."""
    return sorted(_force_law_registry())


def get_integrator(name: str) -> type:
    """The integrator class registered as ``name``."""
    reg = _integrator_registry()
    if name not in reg:
        raise ValueError(f"unknown integrator {name!r}; registered: {', '.join(sorted(reg))}")
    return reg[name]


def get_force_law(name: str) -> type:
    """The force-law class registered as ``name``."""
    reg = _force_law_registry()
    if name not in reg:
        raise ValueError(f"unknown force law {name!r}; registered: {', '.join(sorted(reg))}")
    return reg[name]


def force_law_for(element_type: type) -> type:
    """The registered force law whose ``element`` is ``element_type`` (or its nearest base)."""
    reg = _force_law_registry()
    by_element = {law.element: law for law in reg.values()}
    for klass in element_type.__mro__:
        if klass in by_element:
            return by_element[klass]
    # a class made at run time and shipped by value to a worker process is a copy: the same by its name
    by_name = {_qualified(law.element): law for law in reg.values() if isinstance(law.element, type)}
    for klass in element_type.__mro__:
        if _qualified(klass) in by_name:
            return by_name[_qualified(klass)]
    raise ValueError(f"no registered force law handles {element_type.__name__} elements")
