"""`coremem demo`: the demo organisation, written through the API, in any database."""

from __future__ import annotations

import re
import shlex
import time
from collections import Counter
from pathlib import Path
from typing import Any

import click

from backend.cli.admin import bootstrap_org
from backend.cli.base import DEMO_ADMIN, DEMO_ORG, database_url, main, with_session


def admin_email(org_name: str) -> str:
    """The demo administrator of an organisation: `admin@demo.local` for `Demo`, `admin@acme-bikes.local` for
    `Acme Bikes`."""
    if org_name == DEMO_ORG:
        return DEMO_ADMIN
    slug = re.sub(r"[^a-z0-9]+", "-", org_name.lower()).strip("-") or "demo"
    return f"admin@{slug}.local"


def org_exists(url: str, org_name: str) -> bool:
    from backend.domains.orgs import repository

    return with_session(url, lambda db: repository.get_by_name(db, org_name)) is not None


def make_demo(url: str, org_name: str, seed: int | None = None) -> tuple[dict[str, Any], Counter[str], float]:
    """Bootstrap the organisation, then write the demo into it through the API; (credentials, counts, seconds)."""
    from backend.demo import DEFAULT_SEED, create_demo
    from backend.errors import ApiError as Refused
    from shared.client import ApiError

    started = time.monotonic()
    try:
        credentials = bootstrap_org(url, org_name, admin_email(org_name))
    except Refused as err:  # e.g. the derived administrator address belongs to another organisation already
        raise click.ClickException(f"The demo organisation {org_name!r} could not be made: {err.message}") from None
    try:
        counts = create_demo(url, credentials, seed=DEFAULT_SEED if seed is None else seed)
    except ApiError as err:  # the organisation stays, half filled: say which, so it can be found and removed
        raise click.ClickException(f"The API refused part of the demo for {org_name!r} ({credentials['org_id']}): "
                                   f"{err}") from err
    return credentials, counts, time.monotonic() - started


def describe(org_name: str, credentials: dict[str, Any], counts: Counter[str], seconds: float) -> str:
    made = ", ".join(f"{counts[k]} {k}" for k in ("people", "records", "threads", "stores", "keys"))
    return (f"Demo organisation {org_name!r} ({credentials['org_id']}) created in {seconds:.1f} s: {made}.\n"
            "Keep these; they are shown once:\n"
            f"  login:     {credentials['admin_email']}\n"
            f"  password:  {credentials['admin_password']}\n"
            f"  API key:   {credentials['key']}")


def write_env_file(path: Path, credentials: dict[str, Any]) -> None:
    """The credentials as shell assignments (`. path` sets ORG, KEY, ADMIN_EMAIL, ADMIN_PASSWORD), owner-only."""
    values = {"ORG": credentials["org_id"], "KEY": credentials["key"], "ADMIN_EMAIL": credentials["admin_email"],
              "ADMIN_PASSWORD": credentials["admin_password"]}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600, exist_ok=True)
    path.chmod(0o600)
    lines = ["# The demo organisation's credentials, written by the first `coremem run` (shown once there too)."]
    path.write_text("\n".join([*lines, *(f"{k}={shlex.quote(v)}" for k, v in values.items())]) + "\n")


@main.command()
@click.option("--org", "org_name", default=DEMO_ORG, show_default=True,
              help="Name of the new organisation; its administrator is admin@<name>.local.")
@click.option("--seed", type=int, default=None, help="Another seed gives other demo content.")
def demo(org_name: str, seed: int | None) -> None:
    """Add the demo organisation: three stores, fifty people with records, threads with notes, keys."""
    from backend.cli.admin import check_org_name
    from backend.db import migrate as migrations

    check_org_name(org_name)  # as bootstrap does, before the database is touched
    url = database_url()
    migrations.upgrade(url)
    if org_exists(url, org_name):
        raise click.ClickException(f"An organisation named {org_name!r} exists already; "
                                   f"`coremem demo --org NAME` adds the demo under another name.")
    credentials, counts, seconds = make_demo(url, org_name, seed)
    click.echo(describe(org_name, credentials, counts, seconds))
