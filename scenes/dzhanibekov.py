"""Dzhanibekov's wing nut: a free body spun about its intermediate principal axis flips over and over.

A box with edges (0.3, 0.2, 0.05) m has principal moments Jx < Jy < Jz; spun
about y with a slight perturbation about x and z, it turns over periodically
(the tennis-racket theorem). With no gravity and no joints the only
constraints are the six orthonormality rows of the rotation columns; RATTLE on
them is the discrete Moser–Veselov rigid body, which keeps the angular
momentum exactly and the energy in a narrow band.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

import mbvi

T_END = 12.0
DT = 2e-3


def build(
    spin: float = 6.0,
    perturbation: float = 1e-2,
    size: tuple[float, float, float] = (0.3, 0.2, 0.05),
    density: float = 700.0,
) -> mbvi.Scene:
    """A free box spinning about its intermediate axis.

    Parameters
    ----------
    spin : float, default: 6
        Angular velocity about the body y axis (the intermediate axis for the
        default size), rad/s.
    perturbation : float, default: 1e-2
        Angular velocity about body x and z, rad/s: the seed of the flip.
    size : tuple of 3 float, default: (0.3, 0.2, 0.05)
        Box edges along body x, y, z, m.
    density : float, default: 700
        Density, kg/m³.

    Raises
    ------
    ValueError
        For a ``size`` that is not 3 positive finite lengths (``--param size=0.3`` gave "'float' object is not
        iterable").
    """
    edges = list(size) if isinstance(size, (tuple, list, np.ndarray)) else None
    if not (
        edges is not None
        and len(edges) == 3
        and all(isinstance(e, numbers.Real) and not isinstance(e, (bool, np.bool_)) and 0 < e < math.inf for e in edges)
    ):
        raise ValueError(
            "dzhanibekov: size must be 3 lengths, the box's edges along body x, y, z in metres, each positive "
            f"(on the command line: --param 'size=(0.3,0.2,0.05)'), got {size!r}"
        )
    shape = mbvi.Box(tuple(float(e) for e in edges))
    scene = mbvi.Scene(gravity=None)
    scene.add(
        mbvi.RigidBody(
            "box",
            shape=shape,
            density=density,
            position=(0.0, 0.0, 0.0),
            angular_velocity=np.array([perturbation, spin, perturbation]),
        )
    )
    return scene
