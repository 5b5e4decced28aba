"""MQVersion names by ordinal (what the console shows for a broker's version), checked against the
ordinals the reference lists (Appendix B of the spec) and Java's getVersionDesc at both ends."""

from __future__ import annotations

import pytest

from namesrv.domain.codes import VERSION_NAMES, Version, version_name


def test_the_enum_has_java_s_613_constants_and_every_threshold_we_use_is_named_as_in_java() -> None:
    assert len(VERSION_NAMES) == 613
    for version in Version:
        assert VERSION_NAMES[version] == version.name


@pytest.mark.parametrize(
    ("ordinal", "name"),
    [
        (0, "V3_0_0_SNAPSHOT"),
        (15, "V3_0_0_FINAL"),
        (213, "V4_0_0"),
        (273, "V4_3_0"),
        (313, "V4_5_0"),
        (353, "V4_7_0"),
        (373, "V4_8_0"),
        (393, "V4_9_0"),
        (407, "V4_9_7"),
        (409, "V4_9_8"),
        (433, "V5_1_0"),
        (453, "V5_2_0"),
        (473, "V5_3_0"),
        (477, "V5_3_2"),
        (480, "V5_3_4_SNAPSHOT"),
        (611, "V5_9_9"),
        (612, "HIGHER_VERSION"),
        (9999, "HIGHER_VERSION"),  # past the enum: Java's getVersionDesc answers the last constant
        (-1, "-1"),  # no Java client sends it: shown as the number it is
    ],
)
def test_version_name(ordinal: int, name: str) -> None:
    assert version_name(ordinal) == name
