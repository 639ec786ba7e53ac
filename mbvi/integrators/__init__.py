"""Integrators: the built-ins are plugins registered through ``register_integrators``."""

from mbvi.integrators.base import Integrator

__all__ = ["Integrator"]
