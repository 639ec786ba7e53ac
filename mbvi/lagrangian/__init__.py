"""Mechanics in the user's own generalized coordinates, from a sympy Lagrangian.

:class:`LagrangianSystem` derives (with sympy, once) what the integrators
need; :mod:`mbvi.lagrangian.integrators` holds the integrators for
configuration-dependent mass under the same names as for scenes;
:func:`mbvi.simulate` and :func:`mbvi.equilibrium` dispatch here. sympy is
imported only when a system is built.
"""

from mbvi.lagrangian.system import LagrangianSystem

__all__ = ["LagrangianSystem"]
