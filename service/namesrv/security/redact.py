"""Secrets never leave the process: one place that knows what a secret looks like.

A password inside a URL (``redis://user:PASSWORD@host``, ``?password=...``) becomes ``***``; an
option whose name says it holds a secret (``...Password``, ``...Secret``, ``...SecretKey``,
``...Token``) is replaced whole. Every outward view of the configuration (GET_NAMESRV_CONFIG, GET
/v1/config, ``namesrv -p``) and every log line pass through here.
"""

from __future__ import annotations

import logging
import re

MASK = "***"
# Up to the last '@' before the host: a password may itself hold an unencoded '@', as redis-py
# (urllib) reads the user part up to the last '@' of the authority.
_URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://[^:@/\s]*:)[^/\s]+@")
_QUERY_PASSWORD = re.compile(r"(?P<head>[?&][A-Za-z_]*(?:password|secret|token)[A-Za-z_]*=)[^&\s]+", re.I)
_SECRET_NAME = re.compile(r"(password|secret|token)", re.I)


def redact_text(text: str) -> str:
    """``text`` with the password of every URL in it masked."""
    if "@" not in text and "=" not in text:
        return text  # the common case, checked without a regex
    text = _URL_PASSWORD.sub(lambda m: m["head"] + MASK + "@", text)
    return _QUERY_PASSWORD.sub(lambda m: m["head"] + MASK, text)


def redact_value(name: str, value: str) -> str:
    """An option's value as it may be shown: secrets by name masked whole, URLs' passwords masked."""
    if _SECRET_NAME.search(name):
        return MASK if value else value
    return redact_text(value)


class RedactingFormatter(logging.Formatter):
    """Wraps a formatter so that no log line (message, arguments, traceback) carries a password."""

    def __init__(self, inner: logging.Formatter) -> None:
        super().__init__()
        self.inner = inner

    def format(self, record: logging.LogRecord) -> str:
        return redact_text(self.inner.format(record))
