"""URDF import: every malformed attribute is a ValueError naming the link or joint and the attribute."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

import mbvi

ARM = Path(__file__).parent / "data" / "two_link_arm.urdf"


def _arm(old: str, new: str) -> str:
    """The two-link arm with ``old`` replaced by ``new`` (which must be there)."""
    xml = ARM.read_text()
    assert old in xml
    return xml.replace(old, new, 1)


_ELBOW_PARENT = '<parent link="upper"/>\n    <child link="fore"/>'
_FORE_CYLINDER = '<cylinder radius="0.025" length="0.3"/>'


@pytest.mark.parametrize(
    ("xml", "names"),
    [
        pytest.param(
            _arm('<axis xyz="1 0 0.5"/>', '<axis xyz="0 1"/>'),
            ("URDF joint 'elbow'", "<axis xyz>", "3 numbers", "'0 1'"),
            id="axis-two-numbers",
        ),
        pytest.param(
            _arm('<axis xyz="1 0 0.5"/>', '<axis xyz="1 0 0.5"/><dynamics damping="lots"/>'),
            ("URDF joint 'elbow'", "<dynamics damping>", "'lots'"),
            id="damping-not-a-number",
        ),
        pytest.param(
            _arm('<origin xyz="0.01 0 -0.4"', '<origin xyz="0 0 abc"'),
            ("URDF joint 'elbow'", "<origin xyz>", "'0 0 abc'"),
            id="joint-origin-not-numbers",
        ),
        pytest.param(
            _arm('ixx="0.008"', 'ixx="x"'),
            ("URDF link 'fore'", "<inertial><inertia ixx>", "'x'"),
            id="inertia-not-a-number",
        ),
        pytest.param(
            _arm('<mass value="0.8"/>', '<mass value="heavy"/>'),
            ("URDF link 'fore'", "<inertial><mass value>", "'heavy'"),
            id="mass-not-a-number",
        ),
        pytest.param(
            _arm('<origin xyz="0.01 -0.015 -0.15"', '<origin xyz="1 2"'),
            ("URDF link 'fore'", "<inertial><origin xyz>", "3 numbers"),
            id="inertial-origin-two-numbers",
        ),
        pytest.param(
            _arm(_ELBOW_PARENT, '<child link="fore"/>'),
            ("URDF joint 'elbow'", "<parent link>"),
            id="joint-without-parent",
        ),
        pytest.param(
            _arm(_ELBOW_PARENT, '<parent link="upper"/>\n    <child/>'),
            ("URDF joint 'elbow'", "<child link>"),
            id="joint-child-without-link",
        ),
        pytest.param("", ("URDF", "empty"), id="empty-string"),
        pytest.param(
            _arm(_FORE_CYLINDER, '<box size="0.05 -0.05 0.3"/>'),
            ("URDF link 'fore'", "<visual><geometry><box size>", "positive"),
            id="negative-box-size",
        ),
        pytest.param(
            _arm('<sphere radius="0.04"/>', '<sphere radius="-0.04"/>'),
            ("URDF link 'fore'", "<visual><geometry><sphere radius>", "positive"),
            id="negative-sphere-radius",
        ),
        pytest.param(
            _arm(_FORE_CYLINDER, '<cylinder radius="0.025" length="0"/>'),
            ("URDF link 'fore'", "<visual><geometry><cylinder length>", "positive"),
            id="zero-cylinder-length",
        ),
        pytest.param(
            _arm(_FORE_CYLINDER, '<mesh scale="1 1 1"/>'),
            ("URDF link 'fore'", "<visual><geometry><mesh filename>"),
            id="mesh-without-filename",
        ),
        pytest.param(
            _arm(_FORE_CYLINDER, ""),
            ("URDF link 'fore'", "<visual><geometry>"),
            id="empty-geometry",
        ),
        pytest.param(
            _arm('effort="50"', 'effort="fifty"'),
            ("URDF joint 'shoulder'", "<limit effort>", "'fifty'"),
            id="limit-not-a-number",
        ),
    ],
)
def test_malformed_urdf_is_a_value_error_naming_the_element_and_attribute(xml, names):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with pytest.raises(ValueError) as info:
            mbvi.Scene.from_urdf(xml)
    message = str(info.value)
    for part in names:
        assert part in message, f"{part!r} not in {message!r}"


def test_an_inertia_missing_an_attribute_is_refused_not_read_as_one() -> None:
    """<inertia ixx="0.002"/> was read as diag(0.002, 1, 1) kg m² (yourdfpy's default for a missing attribute)."""
    xml = """<robot name="r"><link name="base"/><link name="arm"><inertial><mass value="1"/>
    <inertia ixx="0.002"/></inertial></link><joint name="j" type="revolute"><parent link="base"/>
    <child link="arm"/><axis xyz="0 0 1"/></joint></robot>"""
    with pytest.raises(ValueError, match="URDF link 'arm': <inertial><inertia ixy> is missing"):
        mbvi.Scene.from_urdf(xml)


def test_a_joint_named_like_a_damping_law_keeps_its_name_and_floating_damping_is_said_to_be_ignored() -> None:
    """A joint called 'j:damping' beside a damped joint 'j' was refused as a duplicate name (mbvi's own damping law
    took it); <dynamics damping> on a floating joint was dropped without the warning the docs promise."""
    inertial = '<inertial><mass value="1"/><inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial>'
    xml = f"""<robot name="r"><link name="base"/><link name="a">{inertial}</link><link name="b">{inertial}</link>
    <joint name="j" type="revolute"><parent link="base"/><child link="a"/><origin xyz="0 0 -1"/>
    <axis xyz="0 0 1"/><dynamics damping="1"/></joint>
    <joint name="j:damping" type="revolute"><parent link="a"/><child link="b"/><origin xyz="0 0 -1"/>
    <axis xyz="0 0 1"/></joint></robot>"""
    scene = mbvi.Scene.from_urdf(xml)
    assert {j.name for j in scene.joints} >= {"j", "j:damping"}
    (law,) = [f for f in scene.forces if isinstance(f, mbvi.JointDamping)]
    assert law.joint == "j" and law.name != "j:damping"
    free = f"""<robot name="r"><link name="base">{inertial}</link><link name="a">{inertial}</link>
    <joint name="free" type="floating"><parent link="base"/><child link="a"/><origin xyz="0 0 -1"/>
    <dynamics damping="3"/></joint></robot>"""
    with pytest.warns(UserWarning, match=r"mbvi ignores damping of floating joints \(free\)"):
        mbvi.Scene.from_urdf(free)


@pytest.mark.parametrize(("old", "new", "match"), [
    ('<mass value="1.5"/>', '<mass value="1.5"/><mass value="5"/>',
     r"URDF link 'upper' <inertial>: more than one <mass>"),
    ("  <link name=\"fore\">\n    <inertial>", "  <link name=\"fore\">\n    <inertial><mass value=\"5\"/>"
     '<inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="1"/></inertial>\n    <inertial>',
     r"URDF link 'fore': more than one <inertial>"),
])  # fmt: skip
def test_a_link_with_two_inertials_or_masses_is_refused_not_half_read(old: str, new: str, match: str) -> None:
    """A second <inertial> (or <mass>) was dropped without a word: the body took the first one's 1 kg, not 5."""
    with pytest.raises(ValueError, match=match):
        mbvi.Scene.from_urdf(_arm(old, new))


def test_text_that_is_neither_xml_nor_a_path_is_a_value_error() -> None:
    """A long string not starting with '<' raised a bare OSError ("File name too long") from the file check."""
    with pytest.raises(ValueError, match=r"URDF: the input is neither XML text \(starting with '<'\) nor a file's"):
        mbvi.Scene.from_urdf(" robot " * 100)
    with pytest.raises(FileNotFoundError, match="URDF file not found"):
        mbvi.Scene.from_urdf("no_such_robot.urdf")
