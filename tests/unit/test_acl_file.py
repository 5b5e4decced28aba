"""Reading RocketMQ's plain_acl.yml."""

from __future__ import annotations

import ipaddress

import pytest

from namesrv.security.acl_file import AclFileError, parse_acl

BROKER_FILE = """
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
    groupPerms:
      - groupA=DENY
  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    admin: true
"""


def test_a_broker_acl_file_reads_as_is() -> None:
    acl = parse_acl(BROKER_FILE, "plain_acl.yml")
    assert [p.text for p in acl.global_white] == ["10.10.103.*", "192.168.0.*"]
    assert sorted(acl.accounts) == ["RocketMQ", "rocketmq2"]
    plain, admin = acl.accounts["RocketMQ"], acl.accounts["rocketmq2"]
    assert (plain.secret_key, plain.admin, plain.white_remote_address) == ("12345678", False, None)
    assert admin.admin is True
    assert admin.white_remote_address is not None
    assert admin.white_remote_address.matches(ipaddress.ip_address("192.168.1.9"))


def test_secrets_stay_out_of_repr() -> None:
    acl = parse_acl(BROKER_FILE, "plain_acl.yml")
    assert "12345678" not in repr(acl)


def test_an_empty_file_is_an_acl_that_allows_nothing_unsigned() -> None:
    acl = parse_acl("", "empty.yml")
    assert (acl.global_white, acl.accounts) == ((), {})


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("accounts: [", "not valid YAML"),
        ("- a\n- b\n", "expected a mapping"),
        ("accounts:\n  - accessKey: a\n", r"accounts\[0\]: accessKey and secretKey are required"),
        (
            "accounts:\n  - {accessKey: a, secretKey: b}\n  - {accessKey: a, secretKey: c}\n",
            "accessKey 'a' is listed twice",
        ),
        ("accounts:\n  - {accessKey: a, secretKey: b, admin: maybe}\n", "admin must be true or false"),
        ("globalWhiteRemoteAddresses: [300.1.1.1]\n", "globalWhiteRemoteAddresses"),
        (
            "accounts:\n  - {accessKey: a, secretKey: b, whiteRemoteAddress: 1.2.3.4-1}\n",
            r"accounts\[0\] \(a\): whiteRemoteAddress",
        ),
    ],
)
def test_bad_files_name_the_entry(text: str, error: str) -> None:
    with pytest.raises(AclFileError, match=error):
        parse_acl(text, "plain_acl.yml")


def test_a_yaml_error_names_the_place_but_never_quotes_the_line() -> None:
    text = 'accounts:\n  - accessKey: a\n    secretKey: "topsecret\n  - x: [\n'
    with pytest.raises(AclFileError) as caught:
        parse_acl(text, "plain_acl.yml")
    assert str(caught.value) == (
        "plain_acl.yml: not valid YAML: found unexpected end of stream at line 5, column 1"
    )
