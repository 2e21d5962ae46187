"""Whether a model or embedding server's address is one its HTTP client can call: a stored address it refuses
would fail every turn, write or search that uses it, long after it was accepted."""

from __future__ import annotations

from urllib.parse import urlparse

__all__ = ["unusable_url"]

MAX_URL_CHARS = 2000


def unusable_url(url: str) -> str | None:
    """What is wrong with `url` as an http(s) server address, in words, or None when it is usable."""
    if len(url) > MAX_URL_CHARS:
        return f"it is longer than {MAX_URL_CHARS} characters"
    if any(c.isspace() or not c.isprintable() for c in url):
        return "it holds spaces, line breaks or other control characters"
    try:
        parsed = urlparse(url)
        parsed.port  # noqa: B018 -- raises ValueError for a port that is no number from 0 to 65535
    except ValueError as exc:
        return f"it is not a valid URL ({exc})"
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        return "it is not an http:// or https:// address with a host"
    return None
