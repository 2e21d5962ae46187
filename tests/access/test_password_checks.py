"""PLT-2 (`POST /admin/login`, PLT-14a): an administrator's password is checked with argon2, which spends a tenth
of a second or more of CPU by design. Checked on the event loop, every login attempt (by anyone, unauthenticated)
stopped every other request for that long, and an unknown e-mail address was answered at once, while a known one
with a wrong password took the whole check: the answer's timing told which addresses exist."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from backend.access import credentials
from backend.errors import RateLimited
from tests.helpers import Org, assert_error, loop_wakes_during

# The loop wakes every millisecond while a check runs. On the loop, a check leaves it no turn (0 or 1 wakes, at its
# ends); off it, the loop keeps turning for as long as argon2 takes (tens of milliseconds at the least).
AWAKE = 10


@pytest.mark.parametrize("stored", [True, False], ids=["wrong password", "unknown address"])
def test_plt_2_a_password_check_leaves_the_event_loop_free_and_takes_as_long_for_an_unknown_address(
        stored: bool) -> None:
    password_hash = credentials.hash_password("the right one") if stored else None
    answer, wakes = loop_wakes_during(lambda: credentials.check_password(password_hash, "a wrong one"))
    assert answer is False
    # For an unknown address the stand-in hash is checked: the loop turns while argon2 runs, as for a known one.
    assert wakes >= AWAKE, wakes


def test_plt_2_the_right_password_still_logs_in_and_a_wrong_one_does_not(org: Org, client: Any) -> None:
    good = client.post("/admin/login", json={"email": org.admin_email, "password": org.admin_password})
    assert good.status_code == 200, good.text
    wrong = client.post("/admin/login", json={"email": org.admin_email, "password": "not it"})
    unknown = client.post("/admin/login", json={"email": "nobody@example.test", "password": org.admin_password})
    assert assert_error(wrong, 401, "bad_login") == assert_error(unknown, 401, "bad_login")


def test_plt_2_logins_beyond_the_checks_under_way_are_refused_not_queued() -> None:
    """A login waiting for a password thread holds its request's database connection: a flood of them would take
    the whole pool. Past MAX_PASSWORD_CHECKS at once, an attempt is 429 with Retry-After, and once the checks
    under way end, logins are checked again."""
    stored = credentials.hash_password("the right one")

    async def flood() -> tuple[list[Any], bool]:
        answers = await asyncio.gather(*(credentials.check_password(stored, "a wrong one") for _ in range(20)),
                                       return_exceptions=True)
        return answers, await credentials.check_password(stored, "the right one")

    answers, afterwards = asyncio.run(flood())
    refused = [a for a in answers if isinstance(a, RateLimited)]
    assert answers.count(False) == credentials.MAX_PASSWORD_CHECKS
    assert len(refused) == 20 - credentials.MAX_PASSWORD_CHECKS
    assert refused[0].status == 429 and refused[0].headers == {"Retry-After": "1"}
    assert afterwards is True
