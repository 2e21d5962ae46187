"""Time-ordered, prefixed identifiers (PLT-15): 48 bits of milliseconds, then 80 random bits, Crockford base32."""

from __future__ import annotations

import os
import time

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"
PREFIXES = frozenset(
    {"org", "key", "idx", "mem", "thr", "itm", "resp", "agt", "run", "win", "evt", "prp", "sum", "adm"}
)


def _encode(value: int, length: int) -> str:
    chars = []
    for _ in range(length):
        chars.append(_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def new_id(prefix: str, *, at_ms: int | None = None) -> str:
    if prefix not in PREFIXES:
        raise ValueError(f"unknown id prefix {prefix!r}")
    millis = int(time.time() * 1000) if at_ms is None else at_ms
    value = (millis << 80) | int.from_bytes(os.urandom(10), "big")
    return f"{prefix}_{_encode(value, 26)}"


def has_prefix(value: str, prefix: str) -> bool:
    return value.startswith(prefix + "_") and len(value) == len(prefix) + 27
