"""Secrets never leave the process: the redaction every outward view and log line uses."""

from __future__ import annotations

import logging
import sys

import pytest

from namesrv.config import Settings
from namesrv.security.redact import RedactingFormatter, redact_text, redact_value


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("redis://default:s3cret@redis:6379/0", "redis://default:***@redis:6379/0"),
        ("rediss://:s3cret@redis:6380", "rediss://:***@redis:6380"),
        (
            "redis+sentinel://u:p%40ss@a:26379,b:26379/mymaster",
            "redis+sentinel://u:***@a:26379,b:26379/mymaster",
        ),
        ("redis://redis:6379/0?password=s3cret&db=1", "redis://redis:6379/0?password=***&db=1"),
        ("redis://redis:6379/0", "redis://redis:6379/0"),
        ("redis://u:p@ss@redis:6379/0", "redis://u:***@redis:6379/0"),
        ("url redis://:a@b/0 and mail x@y.z", "url redis://:***@b/0 and mail x@y.z"),
        ("user@example.com", "user@example.com"),
    ],
)
def test_url_passwords_are_masked(text: str, shown: str) -> None:
    assert redact_text(text) == shown


def test_options_named_as_secrets_are_masked_whole() -> None:
    assert redact_value("sentinelPassword", "s3cret") == "***"
    assert redact_value("adminSecretKey", "s3cret") == "***"
    assert redact_value("sentinelPassword", "") == ""
    assert redact_value("namespace", "namesrv") == "namesrv"


def test_settings_views_mask_the_redis_password() -> None:
    props = Settings(redisUrl="redis://default:s3cret@redis:6379/0").as_properties()
    assert props["redisUrl"] == "redis://default:***@redis:6379/0"
    assert "s3cret" not in repr(props)


def test_log_lines_are_masked_including_tracebacks() -> None:
    formatter = RedactingFormatter(logging.Formatter("%(message)s"))
    try:
        raise ConnectionError("cannot reach redis://default:s3cret@redis:6379")
    except ConnectionError:
        record = logging.LogRecord(
            "t", logging.ERROR, __file__, 1, "connecting to %s", ("redis://:s3cret@x:1",), exc_info=True
        )
        record.exc_info = sys.exc_info()
    line = formatter.format(record)
    assert "s3cret" not in line
    assert line.startswith("connecting to redis://:***@x:1\n")
    assert "redis://default:***@redis:6379" in line
