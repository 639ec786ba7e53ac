"""Vectorized geometry for placing meshes: frames, instancing and tube sweeps.

Pure NumPy, no VTK: every function here works on whole arrays of instances at
once so that a frame update is a handful of array operations whatever the
number of bodies.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "instance_normals",
    "instance_points",
    "rotation_minimizing_frames",
    "segment_frames",
    "tube_faces",
    "tube_points",
]

_EPS = 1e-12


def _normalize(v: NDArray[np.float64], fallback: ArrayLike) -> NDArray[np.float64]:
    """Unit vectors along the last axis; ``fallback`` where ``|v|`` vanishes."""
    norm = np.linalg.norm(v, axis=-1, keepdims=True)
    fb = np.broadcast_to(np.asarray(fallback, dtype=float), v.shape)
    return np.where(norm > _EPS, v / np.maximum(norm, _EPS), fb)


def segment_frames(start: ArrayLike, end: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Orthonormal frames whose third axis points from ``start`` to ``end``.

    Parameters
    ----------
    start, end : array_like, shape (..., 3)
        End points of segments, m.

    Returns
    -------
    rotation : ndarray, shape (..., 3, 3)
        Rotation matrices; column 2 is the unit direction of the segment
        (world z for a segment of zero length).
    length : ndarray, shape (...)
        Segment lengths, m.
    """
    start = np.asarray(start, dtype=float)
    end = np.asarray(end, dtype=float)
    d = end - start
    length = np.linalg.norm(d, axis=-1)
    e3 = _normalize(d, (0.0, 0.0, 1.0))
    # Helper axis: world x unless the segment is nearly parallel to it.
    near_x = np.abs(e3[..., 0:1]) > 0.9
    helper = np.where(near_x, np.array([0.0, 1.0, 0.0]), np.array([1.0, 0.0, 0.0]))
    e1 = _normalize(np.cross(helper, e3), (1.0, 0.0, 0.0))
    e2 = np.cross(e3, e1)
    return np.stack([e1, e2, e3], axis=-1), length


def instance_points(
    template: NDArray[np.floating],
    rotation: NDArray[np.floating] | None,
    translation: NDArray[np.floating],
    scale: NDArray[np.floating] | None = None,
) -> NDArray[np.float64]:
    """Place ``m`` copies of a template point set.

    Each copy is ``x = R @ (s * p) + t`` (scale first, then rotate, then
    translate).

    Parameters
    ----------
    template : ndarray, shape (k, 3)
        Template points in the instance frame.
    rotation : ndarray, shape (m, 3, 3) or None
        Instance rotations (instance frame to world); None for none.
    translation : ndarray, shape (m, 3)
        Instance origins in the world, m.
    scale : ndarray, shape (m, 3), optional
        Per-axis scale of each instance (default: no scaling).

    Returns
    -------
    ndarray, shape (m * k, 3)
        The points of all instances, instance-major.
    """
    m = translation.shape[0]
    if scale is None:
        local = np.broadcast_to(template, (m, *template.shape))
    else:
        local = scale[:, None, :] * template[None, :, :]
    if rotation is not None:
        local = np.einsum("mij,mkj->mki", rotation, local)
    return (local + translation[:, None, :]).reshape(-1, 3)


def instance_normals(
    normals: NDArray[np.floating],
    rotation: NDArray[np.floating],
    scale: NDArray[np.floating] | None = None,
) -> NDArray[np.float64]:
    """Normals of instanced templates (inverse-transpose of ``R diag(s)``).

    Parameters
    ----------
    normals : ndarray, shape (k, 3)
        Unit template normals.
    rotation : ndarray, shape (m, 3, 3)
        Instance rotations.
    scale : ndarray, shape (m, 3), optional
        Per-axis scale of each instance.

    Returns
    -------
    ndarray, shape (m * k, 3)
        Unit normals of all instances.
    """
    if scale is None:
        local = np.broadcast_to(normals, (rotation.shape[0], *normals.shape))
    else:
        inv = 1.0 / np.where(np.abs(scale) > _EPS, scale, _EPS)
        local = _normalize(inv[:, None, :] * normals[None, :, :], (0.0, 0.0, 1.0))
    return np.einsum("mij,mkj->mki", rotation, local).reshape(-1, 3)


def rotation_minimizing_frames(
    path: ArrayLike,
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Twist-free frames along a polyline (double reflection method).

    Wang, Jüttler, Zheng & Liu, "Computation of rotation minimizing frames",
    ACM TOG 27(1), 2008.

    Parameters
    ----------
    path : array_like, shape (k, 3)
        Polyline vertices, m; ``k >= 2``.

    Returns
    -------
    tangent, normal, binormal : ndarray, shape (k, 3)
        Unit tangent and two unit normals at every vertex.
    """
    p = np.asarray(path, dtype=float)
    seg = np.diff(p, axis=0)
    seg_dir = _normalize(seg, (0.0, 0.0, 1.0))
    tangent = np.empty_like(p)
    tangent[0] = seg_dir[0]
    tangent[-1] = seg_dir[-1]
    tangent[1:-1] = _normalize(seg_dir[:-1] + seg_dir[1:], seg_dir[1:])
    frame0, _ = segment_frames(np.zeros(3), tangent[0])
    normal = np.empty_like(p)
    normal[0] = frame0[:, 0]
    for i in range(len(p) - 1):
        v1 = seg[i]
        c1 = v1 @ v1
        if c1 < _EPS:
            normal[i + 1] = normal[i]
            continue
        r_l = normal[i] - (2.0 / c1) * (v1 @ normal[i]) * v1
        t_l = tangent[i] - (2.0 / c1) * (v1 @ tangent[i]) * v1
        v2 = tangent[i + 1] - t_l
        c2 = v2 @ v2
        normal[i + 1] = r_l if c2 < _EPS else r_l - (2.0 / c2) * (v2 @ r_l) * v2
    # Re-orthonormalize against round-off.
    normal = _normalize(normal - np.sum(normal * tangent, axis=1)[:, None] * tangent, (1, 0, 0))
    binormal = np.cross(tangent, normal)
    return tangent, normal, binormal


def tube_points(path: ArrayLike, radius: float, sides: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Vertices and normals of a circular tube swept along a polyline.

    Parameters
    ----------
    path : array_like, shape (k, 3)
        Centre line, m.
    radius : float
        Tube radius, m.
    sides : int
        Vertices per ring.

    Returns
    -------
    points, normals : ndarray, shape (k * sides, 3)
        Ring-major vertices and their unit outward normals; faces from
        :func:`tube_faces` with the same ``k`` and ``sides``.
    """
    _, n, b = rotation_minimizing_frames(path)
    ang = np.linspace(0.0, 2.0 * np.pi, sides, endpoint=False)
    ring = np.cos(ang)[None, :, None] * n[:, None, :] + np.sin(ang)[None, :, None] * b[:, None, :]
    pts = np.asarray(path, dtype=float)[:, None, :] + radius * ring
    return pts.reshape(-1, 3), ring.reshape(-1, 3)


def tube_faces(rings: int, sides: int) -> NDArray[np.int64]:
    """VTK face array (quads) joining consecutive rings of a tube.

    Parameters
    ----------
    rings : int
        Number of rings (vertices of the centre line).
    sides : int
        Vertices per ring.

    Returns
    -------
    ndarray, shape (5 * (rings - 1) * sides,)
        ``[4, a, b, c, d, 4, ...]`` as VTK expects.
    """
    i = np.arange(rings - 1)[:, None]
    j = np.arange(sides)[None, :]
    a = i * sides + j
    b = i * sides + (j + 1) % sides
    c = b + sides
    d = a + sides
    quads = np.stack([np.full_like(a, 4), a, b, c, d], axis=-1)
    return quads.reshape(-1).astype(np.int64)
