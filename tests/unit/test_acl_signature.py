"""RocketMQ 4.x request signatures: golden vectors from the Java 4.9.8 client (AclClientRPCHook,
accessKey RocketMQ, secretKey 12345678)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from namesrv.security.signature import sign, signature_matches, signed_content, signed_fields

AK, SK = "RocketMQ", "12345678"


@pytest.mark.parametrize(
    ("ext", "body", "expected"),
    [
        ({"topic": "TopicTest"}, None, "0jiwhsaYp5ObE5GObbZH1I8/FT4="),
        ({"brokerName": "broker-a"}, None, "Wcc9mOjOUTThPBAr7LTMGUVo3pM="),
        ({}, None, "IUc8rrO/0gDch8CjObLQsW2rsiA="),
        (
            {"namespace": "NS", "key": "k", "value": "v"},
            b"hello-body",
            "74PfL4kEzcLdzW0eesoG+VTkDro=",
        ),
    ],
    ids=["105-route", "205-wipe", "106-no-fields", "100-kv-with-body"],
)
def test_java_golden_vectors(ext: dict[str, str], body: bytes | None, expected: str) -> None:
    fields = signed_fields(AK, SK, ext, body)
    assert fields["Signature"] == expected
    assert fields["AccessKey"] == AK
    assert signature_matches(SK, fields, body)


def test_content_is_values_in_java_key_order_then_body() -> None:
    # Java's TreeMap puts upper case before lower case: AccessKey, key, namespace, value
    fields = {"namespace": "NS", "key": "k", "value": "v", "AccessKey": AK, "Signature": "ignored"}
    assert signed_content(fields, b"hello-body") == b"RocketMQkNSvhello-body"


def test_signature_and_unique_key_flag_are_not_signed() -> None:
    plain = {"AccessKey": AK, "topic": "T"}
    assert sign(SK, {**plain, "Signature": "x", "_UNIQUE_KEY_QUERY": "true"}) == sign(SK, plain)


def test_any_change_breaks_the_signature() -> None:
    fields = signed_fields(AK, SK, {"brokerName": "broker-a"})
    assert not signature_matches(SK, {**fields, "brokerName": "broker-b"}, None)
    assert not signature_matches(SK, fields, b"a body")
    assert not signature_matches("wrong-secret", fields, None)
    assert not signature_matches(SK, {k: v for k, v in fields.items() if k != "Signature"}, None)


def test_keys_beyond_the_bmp_sort_as_java_sorts_them() -> None:
    # UTF-16: U+10000 is D800 DC00, below U+FFFF; by code point it would come after it
    fields = {"\uffff": "b", "\U00010000": "a", "A": "0"}
    assert signed_content(fields, None) == b"0ab"


text = st.text(max_size=20)


@given(st.dictionaries(text, text, max_size=8), st.binary(max_size=64) | st.none())
def test_any_request_signed_verifies_and_any_change_does_not(ext: dict[str, str], body: bytes | None) -> None:
    ext = {k: v for k, v in ext.items() if k not in ("Signature", "AccessKey", "_UNIQUE_KEY_QUERY")}
    fields = signed_fields(AK, SK, ext, body)
    assert signature_matches(SK, fields, body)
    extra = "extra"
    while extra in fields:
        extra += "_"
    assert not signature_matches(SK, {**fields, extra: "x"}, body)  # one more byte signed
    assert not signature_matches(SK, fields, (body or b"") + b"!")
