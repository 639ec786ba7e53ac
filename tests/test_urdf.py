"""URDF import: physics against MuJoCo on the same file, structure, errors and warnings.

The reference is MuJoCo (a test dependency) loading the very same URDF text,
integrated with RK4 at dt = 1e-4 — an independent parser, independent
coordinates (joint angles) and an independent integrator.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

import mbvi

DATA = Path(__file__).parent / "data"
ARM = DATA / "two_link_arm.urdf"
Q0 = {"shoulder": 0.7, "elbow": -0.5}


def load(source, **kw) -> mbvi.Scene:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return mbvi.Scene.from_urdf(source, **kw)


def mujoco_run(xml: str, q0: dict[str, float], t_end: float, bodies: list[str]) -> tuple[dict, dict]:
    """Centres of mass (world, m) and joint coordinates after ``t_end`` in MuJoCo, RK4, dt = 1e-4."""
    mujoco = pytest.importorskip("mujoco")
    tag = '<mujoco><compiler discardvisual="true" balanceinertia="false" fusestatic="false"/></mujoco>'
    start = xml.index("<robot")
    end = xml.index(">", start) + 1
    m = mujoco.MjModel.from_xml_string(xml[:end] + tag + xml[end:])
    m.opt.integrator = mujoco.mjtIntegrator.mjINT_RK4
    m.opt.timestep = 1e-4
    m.opt.gravity[:] = (0.0, 0.0, -9.81)
    assert np.all(m.dof_armature == 0)
    d = mujoco.MjData(m)
    for name, value in q0.items():
        d.qpos[m.joint(name).qposadr[0]] = value
    mujoco.mj_forward(m, d)
    start_com = {b: d.xipos[m.body(b).id].copy() for b in bodies}
    for _ in range(round(t_end / m.opt.timestep)):
        mujoco.mj_step(m, d)
    com = {b: d.xipos[m.body(b).id].copy() for b in bodies}
    qpos = {name: float(d.qpos[m.joint(name).qposadr[0]]) for name in q0}
    return {"start": start_com, "end": com}, qpos


def test_two_link_arm_agrees_with_mujoco():
    xml = ARM.read_text()
    ref, qpos = mujoco_run(xml, Q0, 1.0, ["upper", "fore"])
    traj = mbvi.simulate(load(ARM, joint_positions=Q0), t_end=1.0, dt=1e-4, save_every=10)
    for b in ("upper", "fore"):
        assert np.max(np.abs(traj.position(b)[0] - ref["start"][b])) < 1e-12  # forward kinematics, inertial origins
        assert np.linalg.norm(traj.position(b)[-1] - ref["end"][b]) < 1e-5
        assert np.linalg.norm(traj.position(b)[-1] - traj.position(b)[0]) > 0.05  # control: the arm swung
    for name, value in Q0.items():
        assert traj.joint_angle(name)[0] == pytest.approx(value, abs=1e-14)  # the URDF's joint coordinates
        assert traj.joint_angle(name)[-1] == pytest.approx(qpos[name], abs=1e-5)
    assert np.ptp(traj.energy) <= 1e-5
    assert np.max(traj.constraint_error) <= 1e-10


def test_joint_damping_is_read_and_agrees_with_mujoco():
    xml = ARM.read_text().replace('<axis xyz="0 1 0"/>', '<axis xyz="0 1 0"/>\n    <dynamics damping="0.05"/>')
    scene = load(xml, joint_positions=Q0)
    assert [f.coefficient for f in scene.forces if isinstance(f, mbvi.JointDamping)] == [0.05]
    ref, _ = mujoco_run(xml, Q0, 0.5, ["upper", "fore"])
    traj = mbvi.simulate(scene, t_end=0.5, dt=1e-4, save_every=100)
    for b in ("upper", "fore"):
        assert np.linalg.norm(traj.position(b)[-1] - ref["end"][b]) < 1e-5
    assert traj.energy[-1] < traj.energy[0] - 1e-3  # control: damping took energy out


SLIDER = """<robot name="slider">
  <link name="rail"/>
  <link name="cart">
    <inertial><mass value="2.0"/><inertia ixx="0.01" iyy="0.02" izz="0.02" ixy="0" ixz="0" iyz="0"/></inertial>
    <visual><geometry><box size="0.1 0.1 0.1"/></geometry></visual>
  </link>
  <link name="tool">
    <visual><origin xyz="0 0 -0.1"/><geometry><sphere radius="0.02"/></geometry></visual>
  </link>
  <link name="weight">
    <inertial><origin xyz="0 0 -0.05"/><mass value="1.0"/>
      <inertia ixx="0.001" iyy="0.001" izz="0.001" ixy="0" ixz="0" iyz="0"/></inertial>
  </link>
  <joint name="slide" type="prismatic">
    <parent link="rail"/><child link="cart"/>
    <origin xyz="0 0 1" rpy="0 0 0.5"/><axis xyz="0 0 1"/>
  </joint>
  <joint name="mount" type="fixed">
    <parent link="cart"/><child link="tool"/><origin xyz="0.1 0 0"/>
  </joint>
  <joint name="hang" type="fixed">
    <parent link="tool"/><child link="weight"/><origin xyz="0 0 -0.2"/>
  </joint>
</robot>"""


def test_prismatic_fixed_and_massless_links():
    scene = mbvi.Scene.from_urdf(SLIDER, joint_positions={"slide": 0.3})
    assert [b.name for b in scene.bodies] == ["cart", "weight"]  # rail is the world, tool merged into cart
    assert [j.name for j in scene.joints] == ["slide", "hang"]
    hang = scene.joint("hang")
    assert (hang.a, hang.b) == ("cart", "weight")
    parts = scene.body("cart").shape.describe()["parts"]
    assert [p["type"] for p in parts] == ["box", "sphere"]  # the tool's sphere rides on the cart
    assert np.allclose(np.reshape(parts[1]["transform"], (4, 4))[:3, 3], [0.1, 0.0, -0.1])
    traj = mbvi.simulate(scene, t_end=0.5, dt=1e-3)
    assert traj.position("cart")[0] == pytest.approx([0.0, 0.0, 1.3], abs=1e-14)
    assert traj.position("weight")[0] == pytest.approx([0.1 * np.cos(0.5), 0.1 * np.sin(0.5), 1.05], abs=1e-14)
    # free fall along the vertical slide: d(t) = d₀ − ½ g t²
    d = traj.joint_displacement("slide")
    assert np.max(np.abs(d - (0.3 - 0.5 * 9.81 * traj.t**2))) < 1e-9
    assert np.max(traj.constraint_error) < 1e-10


def test_render_draws_urdf_visuals_and_meshes(tmp_path):
    pv = pytest.importorskip("pyvista")
    pv.Cube(x_length=0.1, y_length=0.05, z_length=0.3).triangulate().save(tmp_path / "fore.stl")
    xml = ARM.read_text().replace('<sphere radius="0.04"/>', '<mesh filename="package://arm/fore.stl" scale="1 1 1"/>')
    (tmp_path / "arm.urdf").write_text(xml)
    scene = load(tmp_path / "arm.urdf", joint_positions=Q0)
    parts = scene.body("fore").shape.describe()["parts"]
    assert [p["type"] for p in parts] == ["cylinder", "mesh"]
    out = tmp_path / "arm.png"
    mbvi.render.snapshot(scene, out)
    assert out.stat().st_size > 1000


def test_a_relative_mesh_is_the_urdf_folders_not_the_working_directorys(tmp_path, monkeypatch):
    """Run from a folder holding another robot's ``meshes/fore.stl``, the import took that one (the working
    directory came first), and the drawing depended on where the user stood."""
    pv = pytest.importorskip("pyvista")
    (tmp_path / "arm" / "meshes").mkdir(parents=True)
    (tmp_path / "meshes").mkdir()
    pv.Cube().triangulate().save(tmp_path / "arm" / "meshes" / "fore.stl")  # the arm's own
    pv.Sphere().save(tmp_path / "meshes" / "fore.stl")  # another robot's, beside the working directory
    xml = ARM.read_text().replace('<sphere radius="0.04"/>', '<mesh filename="meshes/fore.stl"/>')
    (tmp_path / "arm" / "arm.urdf").write_text(xml)
    monkeypatch.chdir(tmp_path)
    parts = load(Path("arm") / "arm.urdf", joint_positions=Q0).body("fore").shape.describe()["parts"]
    assert Path(parts[1]["path"]) == (tmp_path / "arm" / "meshes" / "fore.stl").resolve()


def test_a_corrupt_mesh_is_one_value_error_naming_the_file(tmp_path, capfd):
    """VTK's STL and OBJ readers return an empty mesh for a file they cannot parse (and log a page about
    it): the drawing then failed with PyVista's "Normals cannot be computed for PolyData containing only
    vertex cells", naming nothing."""
    pytest.importorskip("pyvista")
    from mbvi.render.templates import mesh

    (tmp_path / "bad.stl").write_text("this is not an STL file\n" * 20)
    (tmp_path / "empty.obj").write_text("")
    for name in ("bad.stl", "empty.obj"):
        with pytest.raises(ValueError, match=rf"cannot read mesh '.*{name}': it holds no polygons"):
            mesh(str(tmp_path / name))
    captured = capfd.readouterr()
    assert "ERROR" not in captured.err + captured.out  # VTK's own log of it is not shown
    import pyvista as pv

    pv.Sphere().strip().save(tmp_path / "strips.vtk")  # triangle strips only: polygons, drawn
    assert mesh(str(tmp_path / "strips.vtk")).n_faces > 0


def test_urdf_text_read_with_its_byte_order_mark_is_urdf_text():
    """``Path.read_text()`` of a file saved with a BOM starts with U+FEFF: it was taken for a file name."""
    scene = load("\ufeff" + ARM.read_text(), joint_positions=Q0)
    assert {b.name for b in scene.bodies} == {b.name for b in load(ARM, joint_positions=Q0).bodies}


# -- errors and warnings -----------------------------------------------------------------------------
def _arm(old: str, new: str) -> str:
    xml = ARM.read_text()
    assert old in xml
    return xml.replace(old, new)


@pytest.mark.parametrize(
    ("xml", "match"),
    [
        (_arm('<parent link="upper"/>', '<parent link="uper"/>'), r"URDF joint 'elbow': unknown parent link 'uper'"),
        (_arm('<mass value="0.8"/>', '<mass value="-0.8"/>'), r"URDF link 'fore': mass -0.8 kg must be positive"),
        (_arm('ixx="0.008"', 'ixx="-0.008"'), r"URDF link 'fore': .*positive definite"),
        (_arm("</robot>", "<link"), r"URDF: malformed XML"),
        (_arm('type="continuous"', 'type="planar"'), r"URDF joint 'elbow': type 'planar' is not supported"),
        (_arm('<axis xyz="1 0 0.5"/>', '<axis xyz="0 0 0"/>'), r"URDF joint 'elbow': axis .* has no direction"),
        (_arm('<child link="upper"/>', '<child link="fore"/>'), r"URDF link 'fore' has two parent joints"),
        (
            _arm('<link name="fore">', '<link name="fore"></link><link name="stub">'),
            r"URDF link 'stub' has no mass .* moves on continuous joint|URDF link 'fore' has no mass",
        ),
    ],
)
def test_bad_urdf_is_a_value_error_naming_the_link_or_joint(xml, match):
    with pytest.raises(ValueError, match=match):
        load(xml, joint_positions=Q0)


def test_bad_joint_positions_and_missing_files():
    with pytest.raises(ValueError, match=r"joint_positions: unknown URDF joint 'wrist'"):
        load(ARM, joint_positions={"wrist": 0.1})
    with pytest.raises(ValueError, match=r"joint_positions: URDF joint 'mount' is fixed"):
        mbvi.Scene.from_urdf(SLIDER, joint_positions={"mount": 0.1})
    with pytest.raises(FileNotFoundError, match="URDF file not found"):
        mbvi.Scene.from_urdf(DATA / "nope.urdf")


def test_what_mbvi_cannot_represent_is_one_warning_naming_it():
    xml = _arm(
        '<joint name="elbow" type="continuous">',
        '<joint name="elbow" type="continuous">\n    <dynamics damping="0" friction="0.3"/>'
        '\n    <mimic joint="shoulder" multiplier="1"/>',
    )
    xml = xml.replace(
        '<link name="fore">',
        '<link name="fore">\n    <collision><geometry><sphere radius="0.04"/></geometry></collision>',
    )
    sphere = '<geometry><sphere radius="0.04"/></geometry>\n    </visual>'
    xml = xml.replace(sphere, '<geometry><mesh filename="missing.stl"/></geometry>\n    </visual>')
    # a transmission: yourdfpy reads none, and it went unmentioned
    xml = xml.replace("</robot>", '<transmission name="t_elbow"><type>SimpleTransmission</type></transmission>\n'
                      "</robot>")  # fmt: skip
    with pytest.warns(UserWarning) as record:
        scene = mbvi.Scene.from_urdf(xml)
    assert len(record) == 1
    message = str(record[0].message)
    assert "\n" not in message
    for part in (
        "joint limits (shoulder)",
        "joint friction (elbow)",
        "mimic couplings (elbow)",
        "collision geometry (fore)",
        "visuals of links fixed to the world (base)",
        "mesh files not found (not drawn) (fore: missing.stl)",
        "transmissions (t_elbow)",
    ):
        assert part in message
    assert not [f for f in scene.forces if isinstance(f, mbvi.JointDamping)]  # damping 0: no element
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mbvi.Scene.from_urdf(SLIDER)  # nothing ignored, nothing said


def test_a_massless_link_named_world_is_the_world_as_in_ros_descriptions():
    """`<link name="world"/>` fixed to the base (how ROS fixes a robot): an AttributeError before; now the same
    robot as with the base as root, and a massive link named world is refused by name."""
    joint = '<joint name="anchor" type="fixed"><parent link="world"/><child link="base"/></joint>'
    fixed = '<link name="world"/>\n  ' + joint
    xml = ARM.read_text().replace('<robot name="two_link_arm">', '<robot name="two_link_arm">\n  ' + fixed)
    a = mbvi.simulate(load(xml, joint_positions=Q0), 0.2, 1e-3)
    b = mbvi.simulate(load(ARM, joint_positions=Q0), 0.2, 1e-3)
    np.testing.assert_allclose(a.q, b.q, rtol=0, atol=1e-12)
    heavy = xml.replace('<link name="world"/>', '<link name="world"><inertial><mass value="1"/><inertia ixx="1" '
                        'iyy="1" izz="1" ixy="0" ixz="0" iyz="0"/></inertial></link>')  # fmt: skip
    with pytest.raises(ValueError, match="URDF link 'world' has a mass"):
        load(heavy)


def test_zero_friction_as_text_is_no_friction_and_a_leading_newline_is_read():
    """friction="0.0" (yourdfpy keeps it as text) warned "mbvi ignores joint friction"; a triple-quoted URDF string
    (a newline before <?xml ...?>) was malformed XML."""
    xml = _arm('<joint name="elbow" type="continuous">',
               '<joint name="elbow" type="continuous">\n    <dynamics damping="0.0" friction="0.0"/>')  # fmt: skip
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mbvi.Scene.from_urdf("\n" + xml)
    assert not [w for w in caught if "friction" in str(w.message)]


def test_a_joint_position_beyond_pi_is_reported_as_given_and_agrees_with_mujoco():
    """elbow at −3.5 rad: joint_angle read −3.5 + 2π = 2.78 (MuJoCo's qpos −3.5 and −4.93 after 0.5 s)."""
    q0 = {"shoulder": 0.7, "elbow": -3.5}
    xml = ARM.read_text()
    _, qpos = mujoco_run(xml, q0, 0.5, ["upper", "fore"])
    traj = mbvi.simulate(load(ARM, joint_positions=q0), t_end=0.5, dt=1e-4, save_every=10)
    assert traj.joint_angle("elbow")[0] == pytest.approx(-3.5, abs=1e-12)
    assert traj.joint_angle("elbow")[-1] == pytest.approx(qpos["elbow"], abs=1e-5)
