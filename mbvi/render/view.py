"""A scene drawn in a PyVista plotter, movable from frame to frame.

:class:`SceneView` turns a :class:`~mbvi.render.frames.FrameData` into layers
(one actor per kind of element, not per body), sets up camera, ground and
lighting, and :meth:`SceneView.show_frame` moves everything to a frame by
updating arrays in place.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyvista as pv
from numpy.typing import NDArray

from mbvi._validate import is_number
from mbvi.geometry import BodyGeometry
from mbvi.render import templates
from mbvi.render.drawable import drawing_origin
from mbvi.render.frames import FrameData, SegmentSet
from mbvi.render.layers import BeamTube, InstancedLayer, LineLayer, stand
from mbvi.render.style import PALETTE, Sizes, Style, palette_rgb
from mbvi.render.transforms import segment_frames

__all__ = ["CameraSpec", "SceneView", "TrailSpec", "default_view_direction", "weightless_up"]

#: ``None`` (automatic), ``"iso"``, ``"xy"``, ``"xz"``, ``"yz"`` or a PyVista
#: camera position ``[(position), (focal point), (view up)]``.
CameraSpec = str | Sequence[Sequence[float]] | None
#: the named camera placements
CAMERA_NAMES = ("iso", "xy", "xz", "yz")


class TrailSpec:
    """Past positions of some bodies, and how much of them each frame shows.

    Parameters
    ----------
    names : list of str
        Bodies with a trail.
    points : ndarray, shape (samples, b, 3)
        Their positions at the trail samples, m.
    times : ndarray, shape (samples,)
        Times of the trail samples, s.
    upto : ndarray of int, shape (frames,)
        Last trail sample shown at each frame.
    length : float, optional
        Only show the last ``length`` seconds of the trail.
    """

    def __init__(
        self,
        names: list[str],
        points: NDArray[np.float64],
        times: NDArray[np.float64],
        upto: NDArray[np.intp],
        length: float | None = None,
    ) -> None:
        self.names = names
        self.points = points
        self.times = times
        self.upto = upto
        self.length = length

    def window(self, frame: int) -> tuple[int, int]:
        """First and last trail sample shown at ``frame``."""
        hi = int(self.upto[frame])
        lo = 0
        if self.length is not None:
            lo = int(np.searchsorted(self.times, self.times[hi] - self.length))
        return min(lo, hi), hi


def check_view_options(opts: dict[str, Any], func: str) -> None:
    """A ValueError naming the first of :class:`SceneView`'s options (as given to ``func``) out of its range:
    ``ground`` a bool, ``"plane"`` or ``"grid"``; ``joints``, ``time_label`` (and ``scalar_bar``, or None) bools;
    ``scale`` and ``zoom`` positive numbers."""
    for name in ("ground", "joints", "time_label", "scalar_bar"):
        if name not in opts:
            continue
        value = opts[name]
        allowed = ("plane", "grid") if name == "ground" else ()
        truth = isinstance(value, (bool, np.bool_)) or (is_number(value) and value in (0, 1))  # 0/1 as before
        if not (truth or (isinstance(value, str) and value in allowed) or (name == "scalar_bar" and value is None)):
            kinds = "True, False, 'plane' or 'grid'" if name == "ground" else "True or False"
            raise ValueError(f"{func}(): {name} must be {kinds}, got {value!r}")
    for name in ("scale", "zoom"):
        if name in opts and not (is_number(opts[name]) and 0 < float(opts[name]) < np.inf):
            raise ValueError(f"{func}(): {name} must be a positive number, got {opts[name]!r}")
    if opts.get("style") is not None and not isinstance(opts["style"], Style):
        raise ValueError(f"{func}(): style must be an mbvi.render.Style or None, got {opts['style']!r}")
    camera = opts.get("camera")
    if camera is not None and not (isinstance(camera, str) and camera in CAMERA_NAMES):
        if not _camera_position(camera):
            raise ValueError(
                f"{func}(): camera must be None, {', '.join(map(repr, CAMERA_NAMES))} or a camera position "
                f"[(position), (focal point), (view up)] of three finite 3-vectors, got {camera!r}"
            )
        problem = _camera_degeneracy(np.asarray(camera, dtype=float))
        if problem:
            raise ValueError(f"{func}(): camera {camera!r} cannot show anything: {problem}")


def _camera_position(camera: Any) -> bool:
    """Whether ``camera`` is three finite 3-vectors: a position, a focal point and a view-up direction."""
    if isinstance(camera, str):
        return False
    try:
        rows = np.asarray(camera, dtype=float)
    except (TypeError, ValueError):
        return False
    return rows.shape == (3, 3) and bool(np.isfinite(rows).all()) and bool(np.any(rows[2]))


#: a camera's view-up must be at least this sine of an angle away from its direction of view
_MIN_UP_SINE = 1e-6


def _camera_degeneracy(rows: NDArray[np.float64]) -> str | None:
    """Why a camera position ``rows`` (position, focal point, view up; shape (3, 3), m) defines no view, or None.

    A position at the focal point has no direction of view, and a view-up along the direction of view no
    "up" on screen: VTK drew a blank picture for either.
    """
    position, focal, up = rows
    view = focal - position
    scale = max(float(np.max(np.abs(position))), float(np.max(np.abs(focal))), 1.0)
    distance = float(np.linalg.norm(view))
    if distance <= 1e-12 * scale:
        return "its position is its focal point (no direction of view)"
    sine = float(np.linalg.norm(np.cross(view / distance, up / np.linalg.norm(up))))
    if sine < _MIN_UP_SINE:
        return "its view-up is parallel to its direction of view (position to focal point)"
    return None


class SceneView:
    """Everything of one scene added to a plotter.

    Parameters
    ----------
    plotter : pyvista.Plotter
        Target plotter.
    data : FrameData
        Sampled scene.
    trails : TrailSpec, optional
        Motion trails.
    ground : bool or {"plane", "grid"}, default: False
        Draw a ground plane (``True``/``"plane"``: plane with grid lines,
        ``"grid"``: grid lines only) below the scene, perpendicular to gravity.
    joints : bool, default: True
        Draw the joints' markers (ball, hinge pin, slider rod, cube). The
        bones, thin grey lines from a rigid body's centre to the joints it
        carries, are drawn either way: they show what is linked to what.
    scale : float, default: 1
        Multiplies the automatic element sizes.
    style : Style, optional
        Colours.
    scalar_bar : bool, optional
        Show the strain colour bar (default: when the scene has beams).
    time_label : bool, default: False
        Show ``t = … s`` in the upper-left corner.
    camera : CameraSpec, default: None
        Camera placement; ``None`` chooses a view of the plane in which the
        scene moves most, slightly rotated, gravity pointing down. A camera
        position ``[(position), (focal point), (view up)]`` needs a position
        away from its focal point and a view-up not along the direction of
        view (either is a ValueError: VTK drew a blank picture).
    zoom : float, default: 1.0
        Camera zoom after fitting the scene (> 1 magnifies).

    Raises
    ------
    ValueError
        For an option out of range, or a scene no picture can show: a drawn
        position that is not finite, or farther from the scene's centre than
        :data:`mbvi.render.drawable.MAX_REACH` (a run that blew up).

    Notes
    -----
    The meshes hold coordinates relative to :attr:`origin`, the centre of
    everything drawn over all frames, and their actors stand there, so that
    a scene far from the world's origin keeps its shape in single precision;
    the camera, the actors' bounds and anything else added to the plotter
    stay in world coordinates.
    """

    def __init__(
        self,
        plotter: pv.Plotter,
        data: FrameData,
        *,
        trails: TrailSpec | None = None,
        ground: bool | str = False,
        joints: bool = True,
        scale: float = 1.0,
        style: Style | None = None,
        scalar_bar: bool | None = None,
        time_label: bool = False,
        camera: CameraSpec = None,
        zoom: float = 1.0,
    ) -> None:
        check_view_options(
            {"ground": ground, "joints": joints, "scale": scale, "scalar_bar": scalar_bar, "time_label": time_label,
             "zoom": zoom, "camera": camera, "style": style}, "SceneView",
        )  # fmt: skip
        self.plotter = plotter
        self.data = data
        self.style = style or Style()
        self.trails = trails
        #: the point the meshes' coordinates are relative to, m (world coordinates, shape (3,))
        self.origin = drawing_origin(data, trails)
        self._templates = {_shape_key(b): _shape_template(b) for b in data.rigid}
        radii = [np.linalg.norm(t.points, axis=1).max() for t in self._templates.values() if t is not None]
        motion = self._motion_points()
        self.sizes = Sizes.for_frames(data, scale, extent=float(np.max(np.ptp(motion, axis=0))), rigid_radii=radii)
        self._updaters: list[Any] = []
        self._time_actor: Any = None
        self._time_fmt = _time_format(data.times)
        self._points: NDArray[np.float64] | None = None
        plotter.set_background(self.style.background)
        self._add_bodies()
        self._add_segments()
        if joints:
            self._add_joints()
        self._add_anchors()
        self._add_beams(scalar_bar)
        if trails is not None and trails.names:
            self._add_trails()
        if ground:
            self._add_ground("grid" if ground == "grid" else "plane")
        if time_label:
            # a plain text actor, not a corner annotation: that one re-fits its font at every
            # render, which cost 20–40 ms per frame (more than drawing a pendulum) headless
            w, h = plotter.window_size
            font = max(9, round(1.25 * plotter.window_size[1] / 50))
            self._time_actor = plotter.add_text(
                "", position=(4.0 / w, 1.0 - 5.0 / h), viewport=True, font_size=font, color=self.style.text
            )
            self._time_actor.GetTextProperty().SetVerticalJustificationToTop()
        self._extent_bounds = self._all_frames_bounds()
        self._place_camera(camera, zoom)
        self.frame = -1
        self.show_frame(0)

    # ------------------------------------------------------------------ frames
    def show_frame(self, frame: int) -> None:
        """Move every actor to sampled frame ``frame`` (no render call).

        The camera's clipping range is reset around every element of every
        frame (and whatever else the renderer shows, such as the ground), so
        that no body is cut by the near or far plane whichever frame is shown
        and wherever the camera is.
        """
        frame = int(frame) % self.data.n_frames
        for update in self._updaters:
            update(frame)
        if self._time_actor is not None:
            self._time_actor.SetInput(self._time_fmt.format(self.data.times[frame]))
        self.frame = frame
        self.reset_clipping_range()

    def reset_clipping_range(self) -> None:
        """Fit the camera's near and far planes around the scene at every frame.

        The range covers the padded bounding box of every drawn element over
        all sampled frames and the bounds of the actors as they are now (the
        ground plane, markers). Call it after moving the camera yourself; the
        view calls it at every :meth:`show_frame`.
        """
        renderer = self.plotter.renderer
        now = np.asarray(renderer.ComputeVisiblePropBounds(), dtype=float).reshape(3, 2)
        box = self._extent_bounds.copy()
        if np.all(now[:, 0] <= now[:, 1]):  # VTK returns an inverted box when nothing is visible
            box[:, 0] = np.minimum(box[:, 0], now[:, 0])
            box[:, 1] = np.maximum(box[:, 1], now[:, 1])
        renderer.ResetCameraClippingRange(*box.ravel())

    # ------------------------------------------------------------------ layers
    def _body_colors(self) -> tuple[NDArray[np.uint8], NDArray[np.uint8]]:
        """Palette colours per body; many particles (a chain) share the first colour."""
        p, r = len(self.data.particles), len(self.data.rigid)
        pcol = palette_rgb(p) if p <= len(PALETTE) else np.repeat(palette_rgb(1), p, axis=0)
        rcol = palette_rgb(r, offset=min(p, 1) if p > len(PALETTE) else p)
        if r > len(PALETTE):
            rcol = np.repeat(palette_rgb(1, offset=1), r, axis=0)
        return pcol, rcol

    def _add_bodies(self) -> None:
        d, s = self.data, self.sizes
        pcol, rcol = self._body_colors()
        if d.particles:
            radii = s.particle_radii(d.particle_mass)
            res = 20 if len(d.particles) <= 30 else 12
            spheres = InstancedLayer(
                self.plotter, templates.sphere(1.0, res), len(d.particles), colors=pcol, origin=self.origin
            )
            scale = np.repeat(radii[:, None], 3, axis=1)
            self._updaters.append(lambda f: spheres.update(d.particle_pos[f], scale=scale))
        groups: dict[str, list[int]] = {}
        for i, body in enumerate(d.rigid):
            groups.setdefault(_shape_key(body), []).append(i)
        for key, members in groups.items():
            tmpl = self._rigid_template(d.rigid[members[0]])
            idx = np.asarray(members)
            layer = InstancedLayer(self.plotter, tmpl, len(members), colors=rcol[idx], origin=self.origin)
            self._updaters.append(
                lambda f, layer=layer, idx=idx: layer.update(d.rigid_pos[f, idx], rotation=d.rigid_rot[f, idx])
            )
            del key

    def _rigid_template(self, body: BodyGeometry) -> templates.Template:
        """The mesh of ``body`` (built once per shape); a cube of two size units when nothing says its size."""
        key = _shape_key(body)
        if key not in self._templates:
            self._templates[key] = _shape_template(body)
        return self._templates[key] or templates.box((2 * self.sizes.unit,) * 3)

    def _add_segments(self) -> None:
        d, s, st = self.data, self.sizes, self.style
        rods = d.segments["rod"]
        if len(rods):
            self._add_stretched(rods, templates.unit_rod(s.rod, 16 if len(rods) <= 50 else 10), 1.0, st.rod)
        springs = d.segments["spring"]
        if len(springs):
            # a coil is stretched along its axis, its wire with it: each group of springs of about one length
            # (within a factor 1.5) gets a coil built at that length (one built 1 m long, drawn 20 m long, was a
            # solid column through its anchors)
            typical = np.median(np.linalg.norm(springs.end - springs.start, axis=-1), axis=0)
            typical = np.where(typical > 0.0, typical, s.unit)
            group = np.round(np.log(typical) / np.log(1.5)).astype(int)
            for g in np.unique(group):
                members = np.flatnonzero(group == g)
                built = float(np.median(typical[members]))
                names = [springs.names[i] for i in members]
                part = SegmentSet(names, springs.start[:, members], springs.end[:, members])
                self._add_stretched(part, templates.helix(s.coil, s.wire, length=built), built, st.spring)
        for kind, color, width in (("damper", st.damper, s.damper), ("bone", st.bone, 2.0)):
            seg = d.segments[kind]
            if not len(seg):
                continue
            lines = LineLayer(self.plotter, [2] * len(seg), color=color, width=width, origin=self.origin)
            self._updaters.append(
                lambda f, lines=lines, seg=seg: lines.update(
                    np.stack([seg.start[f], seg.end[f]], axis=1).reshape(-1, 3)
                )
            )

    def _add_stretched(self, seg: SegmentSet, tmpl: templates.Template, built: float, color: Any) -> None:
        """One instanced layer of ``tmpl`` (built ``built`` m long along z) from each segment's start to its end."""
        layer = InstancedLayer(self.plotter, tmpl, len(seg), color=color, origin=self.origin)

        def update(f: int) -> None:
            rot, length = segment_frames(seg.start[f], seg.end[f])
            scale = np.ones((len(length), 3))
            scale[:, 2] = length / built
            layer.update(seg.start[f], rotation=rot, scale=scale)

        self._updaters.append(update)

    def _add_joints(self) -> None:
        j = self.sizes.joint
        shapes = {
            "spherical": templates.sphere(0.8 * j, 14),
            "revolute": templates.cylinder(0.7 * j, 2.4 * j, 20),
            "prismatic": templates.cylinder(0.3 * j, 5.0 * j, 12),
            "fixed": templates.box((1.3 * j,) * 3),
        }
        for marker in self.data.joints:
            layer = InstancedLayer(
                self.plotter, shapes[marker.kind], marker.position.shape[1], color=self.style.joint, origin=self.origin
            )

            def update(f: int, layer: InstancedLayer = layer, marker: Any = marker) -> None:
                rot, _ = segment_frames(np.zeros(3), marker.axis[f])
                layer.update(marker.position[f], rotation=rot)

            self._updaters.append(update)

    def _add_anchors(self) -> None:
        pts = self.data.world_anchors
        if not len(pts):
            return
        anchor = templates.box((self.sizes.anchor,) * 3)
        layer = InstancedLayer(self.plotter, anchor, len(pts), color=self.style.anchor, origin=self.origin)
        layer.update(pts)

    def _add_beams(self, scalar_bar: bool | None) -> None:
        d = self.data
        if not d.beams:
            return
        clim = max(
            max(float(np.max(np.abs([b.strain(f) for f in range(d.n_frames)]))) for b in d.beams),
            1e-9,
        )
        show_bar = True if scalar_bar is None else scalar_bar
        for i, beam in enumerate(d.beams):
            radius = min(0.015 * beam.length, 0.8 * self.sizes.unit) if self.sizes.unit else 0.015 * beam.length
            tube = BeamTube(
                self.plotter,
                beam.nodes.shape[1],
                radius=radius,
                clim=clim,
                cmap=self.style.strain_cmap,
                scalar_bar=show_bar and i == 0,
                font_size=max(7, round(self.plotter.window_size[1] / 45)),
                origin=self.origin,
            )
            self._updaters.append(lambda f, tube=tube, beam=beam: tube.update(beam.nodes[f], beam.node_strain(f)))

    def _add_trails(self) -> None:
        tr = self.trails
        assert tr is not None
        samples, count = tr.points.shape[0], tr.points.shape[1]
        pcol, rcol = self._body_colors()
        names = self.data.particles + [b.name for b in self.data.rigid]
        allcol = np.concatenate([pcol, rcol]) if len(names) else np.zeros((0, 3), np.uint8)
        lookup = {n: allcol[i] for i, n in enumerate(names)}
        colors = np.asarray([lookup.get(n, palette_rgb(1)[0]) for n in tr.names], dtype=np.uint8)
        lines = LineLayer(self.plotter, [samples] * count, color="black", width=2.5, colors=colors, origin=self.origin)
        pts = np.transpose(tr.points, (1, 0, 2))  # (b, samples, 3)

        def update(f: int) -> None:
            lo, hi = tr.window(f)
            shown = pts.copy()
            shown[:, :lo] = pts[:, lo : lo + 1]
            shown[:, hi + 1 :] = pts[:, hi : hi + 1]
            lines.update(shown.reshape(-1, 3))

        self._updaters.append(update)

    # ------------------------------------------------------- ground and camera
    def _up(self) -> NDArray[np.float64]:
        """The picture's up: against gravity; without gravity, see :func:`weightless_up`."""
        g = self.data.gravity
        n = float(np.linalg.norm(g))
        return -g / n if n > 0 else weightless_up(self._motion_points())

    def _scene_points(self) -> NDArray[np.float64]:
        """Every point the camera should keep in view, shape (N, 3) (computed once)."""
        if self._points is None:
            self._points = self._collect_scene_points()
        return self._points

    def _collect_scene_points(self) -> NDArray[np.float64]:
        pts = self.data.all_points()
        if len(self.data.rigid):
            # a rigid body's whole shape stays in view: its centre ± its bounding radius
            radii = np.array([np.linalg.norm(self._rigid_template(b).points, axis=1).max() for b in self.data.rigid])
            offsets = np.concatenate([np.eye(3), -np.eye(3)])  # (6, 3)
            ext = self.data.rigid_pos[:, :, None, :] + radii[None, :, None, None] * offsets[None, None]
            pts = np.concatenate([pts, ext.reshape(-1, 3)])
        if self.trails is not None and self.trails.names:  # (finite: drawing_origin refused the view otherwise)
            pts = np.concatenate([pts, self.trails.points.reshape(-1, 3)])
        return pts if len(pts) else np.zeros((1, 3))

    def _motion_points(self) -> NDArray[np.float64]:
        """The points the default view direction is fitted to, shape (N, 3), m.

        Bodies' centres at every frame, the points that rods, springs, dampers and joints connect, world
        anchors, beam nodes and trails — not the rigid bodies' bounding spheres, which add the same spread
        along every axis and would hide the plane in which a rigid pendulum swings.
        """
        pts = self.data.all_points()
        if self.trails is not None and self.trails.names:  # (finite: drawing_origin refused the view otherwise)
            pts = np.concatenate([pts, self.trails.points.reshape(-1, 3)])
        return pts if len(pts) else np.zeros((1, 3))

    def _hinge_axes(self) -> NDArray[np.float64]:
        """World axes of the revolute joints at every frame, shape (N, 3) (unit vectors)."""
        axes = [m.axis.reshape(-1, 3) for m in self.data.joints if m.kind == "revolute"]
        out = np.concatenate(axes) if axes else np.zeros((0, 3))
        return out[np.all(np.isfinite(out), axis=1)]

    def _extent_points(self) -> NDArray[np.float64]:
        """Padded bounding box of the scene, shape (2, 3): lower and upper corner."""
        pts = self._scene_points()
        pad = 1.5 * self.sizes.unit
        return np.array([pts.min(axis=0) - pad, pts.max(axis=0) + pad])

    def _all_frames_bounds(self) -> NDArray[np.float64]:
        """Box around every drawn element at every frame, shape (3, 2): ``[[xmin, xmax], [ymin, ymax], …]``, m.

        Points of the scene (rigid bodies as their bounding spheres) padded
        by more than the largest half-size of a drawn element (a particle's
        sphere is at most ``2 * unit`` in radius, a prismatic joint's marker
        ``2.75 * unit`` long, a beam's tube at most ``0.8 * unit`` thick).
        """
        pts = self._scene_points()
        pad = 2.5 * self.sizes.unit
        return np.stack([pts.min(axis=0) - pad, pts.max(axis=0) + pad], axis=1)

    def _add_ground(self, kind: str) -> None:
        up = self._up()
        lo, hi = self._extent_points()
        centre = 0.5 * (lo + hi)
        corners = np.array(np.meshgrid(*zip(lo, hi, strict=True))).reshape(3, -1).T
        heights = corners @ up
        # A little below the lowest point, so that nothing seems to rest on the ground.
        height = float(heights.min() - 0.08 * (heights.max() - heights.min()))
        size = 1.25 * float(np.max(hi - lo))
        middle = centre + (height - centre @ up) * up
        plane = pv.Plane(
            center=middle - self.origin, direction=up, i_size=size, j_size=size, i_resolution=12, j_resolution=12
        )  # relative to the scene's origin, as the layers (single precision far from the world's origin)
        actors = []
        if kind == "plane":
            actors.append(self.plotter.add_mesh(plane, color=self.style.ground, specular=0.0, ambient=0.3))
        edges = plane.extract_all_edges()
        actors.append(self.plotter.add_mesh(edges, color=self.style.grid, line_width=1.0, lighting=False))
        for actor in actors:
            stand(actor, self.origin)

    def _place_camera(self, camera: CameraSpec, zoom: float) -> None:
        if camera is not None and not isinstance(camera, str):
            self.plotter.camera_position = [tuple(map(float, v)) for v in camera]
            if zoom != 1.0:  # (it was ignored with a camera position)
                self.plotter.camera.zoom(float(zoom))
            return
        up = self._up()
        if camera in ("xy", "xz", "yz"):
            # from +z, −y and +x: the first axis named to the right, the second up (from −x, "yz" was mirrored)
            normal = {"xy": 2, "xz": 1, "yz": 0}[camera]
            direction = np.eye(3)[normal] * (-1.0 if camera == "xz" else 1.0)
            view_up = np.eye(3)[{"xy": 1, "xz": 2, "yz": 2}[camera]]
        elif camera in (None, "iso"):
            lo, hi = self._extent_points()
            direction = default_view_direction(
                self._motion_points(), up, hi - lo, iso=camera == "iso", hinge_axes=self._hinge_axes()
            )
            view_up = up
        else:
            raise ValueError(f"camera must be None, 'iso', 'xy', 'xz', 'yz' or a camera position, got {camera!r}")
        self._fit_camera(direction, view_up, zoom)

    def _fit_camera(self, direction: NDArray[np.float64], view_up: NDArray[np.float64], zoom: float) -> None:
        """Aim along ``-direction`` and back off until every scene point is in view."""
        cam = self.plotter.camera
        d = direction / np.linalg.norm(direction)
        right = np.cross(view_up, d)
        right /= np.linalg.norm(right)
        true_up = np.cross(d, right)
        pts = self._scene_points()
        pad = 1.2 * self.sizes.unit
        r, u, z = pts @ right, pts @ true_up, pts @ d
        rc, uc = 0.5 * (r.min() + r.max()), 0.5 * (u.min() + u.max())
        zc = 0.5 * (z.min() + z.max())
        focal = rc * right + uc * true_up + zc * d
        w, h = self.plotter.window_size
        tan_v = np.tan(np.radians(cam.view_angle) / 2.0)
        tan_h = tan_v * w / h
        depth = z - zc  # towards the camera
        dist = np.max(np.maximum((np.abs(u - uc) + pad) / tan_v, (np.abs(r - rc) + pad) / tan_h) + depth + pad)
        dist = max(float(dist), 1e-6) * 1.04
        cam.focal_point = tuple(focal)
        cam.position = tuple(focal + dist * d)
        cam.up = tuple(true_up)
        if zoom != 1.0:
            cam.zoom(zoom)


def weightless_up(points: NDArray[np.float64]) -> NDArray[np.float64]:
    """The up direction of a picture of a scene without gravity, from the spread of its ``points`` (N, 3), m.

    World +z, unless the points spread in a plane about level with x–y (their least principal axis within
    45° of z): then the plane's smaller in-plane axis (towards +y), so that the default camera, which looks
    across the larger horizontal spread, sees the plane face-on (with +z a planar orbit in x–y was seen almost
    edge-on, a flat ellipse of a quarter of its height).
    """
    z = np.array([0.0, 0.0, 1.0])
    pts = np.asarray(points, dtype=float).reshape(-1, 3)
    if len(pts) < 3:
        return z
    spread, axes = np.linalg.eigh((pts - pts.mean(axis=0)).T @ (pts - pts.mean(axis=0)))  # ascending
    if not (spread[1] > 0.0 and spread[0] < 0.25 * spread[1] and abs(axes[2, 0]) > math.sqrt(0.5)):
        return z  # no plane (a point, a line, a ball), or one the camera already sees across
    up = axes[:, 1]
    return up if (up[1], up[0]) >= (0.0, 0.0) else -up


def default_view_direction(
    points: NDArray[np.float64],
    up: NDArray[np.float64],
    extent: NDArray[np.float64],
    *,
    iso: bool = False,
    hinge_axes: NDArray[np.float64] | None = None,
) -> NDArray[np.float64]:
    """Unit direction from the scene towards the default camera.

    The camera looks across the scene's main horizontal spread — the
    horizontal principal axis of ``points`` (a straight chain is seen from
    the side, whatever its direction; a pendulum swinging in the x–z plane,
    a particle or a rigid body, face-on) — turned a little sideways and
    raised (22°/14°, or 40°/30° for ``iso``). When the points have no clear
    main horizontal direction (a pendulum hanging straight down), it looks
    along the revolute joints' axes if they agree on a horizontal direction
    (across the plane the hinged bodies swing in), else across the thinnest
    horizontal extent of the bounding box.

    Parameters
    ----------
    points : ndarray, shape (N, 3)
        The points to fit the direction to, m: bodies' centres over the
        frames and the points that links and joints connect (not the rigid
        bodies' bounding spheres, which spread equally along every axis).
    up : ndarray, shape (3,)
        Unit up direction (against gravity).
    extent : ndarray, shape (3,)
        Size of the padded bounding box, m.
    iso : bool, default: False
        The steeper "iso" view.
    hinge_axes : ndarray, shape (K, 3), optional
        Unit axes of the revolute joints in the world (at every frame).

    Returns
    -------
    ndarray, shape (3,)
    """
    up = np.asarray(up, dtype=float)
    pts = np.asarray(points, dtype=float).reshape(-1, 3)
    base = _main_horizontal_normal(pts - pts.mean(axis=0) if len(pts) else pts, up, minor=True)
    if base is None and hinge_axes is not None and len(hinge_axes):
        base = _main_horizontal_normal(np.asarray(hinge_axes, dtype=float).reshape(-1, 3), up, minor=False)
    if base is None:
        horizontal_axes = [i for i in range(3) if abs(up[i]) < 0.5]
        front = min(horizontal_axes, key=lambda i: extent[i]) if horizontal_axes else 1
        base = -np.eye(3)[front]
    base = base - (base @ up) * up
    base = base / np.linalg.norm(base)
    az, el = (np.radians(40.0), np.radians(30.0)) if iso else (np.radians(22.0), np.radians(14.0))
    side = np.cross(up, base)
    return np.cos(el) * (np.cos(az) * base + np.sin(az) * side) + np.sin(el) * up


def _main_horizontal_normal(
    vectors: NDArray[np.float64], up: NDArray[np.float64], *, minor: bool
) -> NDArray[np.float64] | None:
    """The horizontal direction to look along, from the spread of ``vectors`` (shape (N, 3)) across ``up``.

    The horizontal components' second moments have a larger and a smaller principal axis; when the larger
    moment is more than twice the smaller, this returns the smaller axis (``minor=True``: across the main
    spread of centred points) or the larger (``minor=False``: along the common direction of axes, whose
    signs do not matter), signed like ``-e_i`` for axis-aligned scenes. None when there is no such direction.
    """
    if len(vectors) < 1:
        return None
    flat = vectors - np.outer(vectors @ up, up)  # horizontal components
    w, v = np.linalg.eigh(flat.T @ flat)
    # eigenvalues ascending; the one ~0 is `up` itself, the other two span the horizontal plane
    horizontal = [i for i in range(3) if abs(v[:, i] @ up) < 0.5]
    if len(horizontal) != 2:
        return None
    small, large = sorted(horizontal, key=lambda i: w[i])
    spread = float(np.sum(vectors * vectors))  # the whole second moment, vertical included
    if not (w[large] > 2.0 * max(w[small], 0.0) and w[large] > 1e-12 * spread):
        return None  # no main direction, or only round-off off the vertical (a pendulum hanging straight)
    base = v[:, small if minor else large]
    return base if base[np.argmax(np.abs(base))] < 0 else -base  # like -e_i for axis-aligned scenes


def _shape_template(body: BodyGeometry) -> templates.Template | None:
    """The mesh of a rigid body's shape, or without one the box of its mass and inertia; None when neither says
    its size (the view then draws a cube sized by the scene)."""
    if body.shape:
        return templates.body_shape(dict(body.shape))
    inertia = body.inertia
    mass = body.mass
    if inertia is not None and mass > 0:
        moments = np.asarray(inertia, dtype=float)
        axes = body.axes_matrix
        if moments.ndim == 2:
            moments, axes = np.linalg.eigh(0.5 * (moments + moments.T))
        ext = np.sqrt(np.clip(6.0 / mass * (moments.sum() - 2.0 * moments), 0.0, None))
        if np.all(ext > 0):
            box = templates.box(tuple(ext))  # type: ignore[arg-type]
            return templates.Template(box.points @ axes.T, box.normals @ axes.T, box.faces, box.n_faces)
    return None


def _shape_key(body: BodyGeometry) -> str:
    """Bodies with equal keys share one template (and one actor)."""
    if body.shape:
        return json.dumps({"shape": dict(body.shape)}, sort_keys=True)
    return json.dumps({"inertia": body.inertia, "mass": body.mass, "axes": body.principal_axes}, sort_keys=True)


def _time_format(times: NDArray[np.float64]) -> str:
    """``"t = {:.Nf} s"`` with enough decimals to tell frames apart."""
    if len(times) > 1:
        step = float(np.min(np.diff(times))) if np.all(np.diff(times) > 0) else float(np.ptp(times)) / len(times)
        decimals = int(np.clip(np.ceil(-np.log10(step)) + 1, 2, 6)) if step > 0 else 2
    else:
        decimals = 2
    return "t = {:." + str(decimals) + "f} s"
