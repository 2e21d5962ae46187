"""Secrets and tokens: key secrets, administrator tokens, subject tokens (PyJWT) and password hashes."""

from __future__ import annotations

import asyncio
import hashlib
import secrets
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any

import jwt
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from backend.errors import RateLimited

KEY_PREFIX = "ck_"
ADMIN_TOKEN_PREFIX = "cat_"
SUBJECT_TOKEN_PREFIX = "cst_"
_hasher = PasswordHasher()


def hash_secret(secret: str) -> str:
    # Secrets carry 256 random bits, so a fast hash is enough; passwords (below) get argon2.
    return hashlib.sha256(secret.encode()).hexdigest()


def new_key_secret() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def new_admin_token() -> str:
    return ADMIN_TOKEN_PREFIX + secrets.token_urlsafe(32)


def new_password() -> str:
    return secrets.token_urlsafe(18)


def hash_password(password: str) -> str:
    return _hasher.hash(password)


def password_matches(password_hash: str, password: str) -> bool:
    try:
        return _hasher.verify(password_hash, password)
    except (VerificationError, InvalidHashError):
        return False


# argon2 takes a tenth of a second or more of CPU by design. On the event loop, each login attempt, answered or
# not, stopped every other request for that long; here they queue for two threads (argon2 releases the
# interpreter's lock). A waiting login holds its request's database connection, so beyond MAX_PASSWORD_CHECKS
# at once an attempt is refused (429) rather than queued: a flood of logins cannot take the connection pool.
_password_threads = ThreadPoolExecutor(max_workers=2, thread_name_prefix="password")
MAX_PASSWORD_CHECKS = 8
_checks_in_flight = 0


@cache
def _stand_in_hash() -> str:
    return _hasher.hash(secrets.token_urlsafe(18))


async def check_password(password_hash: str | None, password: str) -> bool:
    """`password_matches` off the event loop. Without a hash (no administrator has that e-mail address) it checks
    against a stand-in hash and answers False, so an unknown address takes as long as a wrong password and the
    answer's timing does not tell which addresses exist. RateLimited when MAX_PASSWORD_CHECKS are under way."""
    global _checks_in_flight
    if _checks_in_flight >= MAX_PASSWORD_CHECKS:
        raise RateLimited(f"{MAX_PASSWORD_CHECKS} logins are being checked at this moment; try again in a second.",
                          retry_after=1)
    _checks_in_flight += 1
    try:
        return await asyncio.get_running_loop().run_in_executor(_password_threads, _check, password_hash, password)
    finally:
        _checks_in_flight -= 1


def _check(password_hash: str | None, password: str) -> bool:
    if password_hash is None:
        password_matches(_stand_in_hash(), password)
        return False
    return password_matches(password_hash, password)


def mint_subject_token(secret: str, *, org_id: str, key_id: str, subject_id: str,
                       attributes: dict[str, list[str]], ttl_seconds: int) -> tuple[str, datetime]:
    expires_at = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=ttl_seconds)
    claims = {"iss": "coremem", "org": org_id, "kid": key_id, "sub": subject_id, "attrs": attributes,
              "exp": int(expires_at.timestamp())}
    return SUBJECT_TOKEN_PREFIX + jwt.encode(claims, secret, algorithm="HS256"), expires_at


def read_subject_token(secret: str, token: str) -> dict[str, Any] | None:
    """The token's claims, or None when it is forged, malformed or expired."""
    try:
        claims = jwt.decode(token[len(SUBJECT_TOKEN_PREFIX):], secret, algorithms=["HS256"], issuer="coremem",
                            options={"require": ["exp", "sub", "kid", "org"]})
    except jwt.PyJWTError:
        return None
    return claims if isinstance(claims, dict) else None
