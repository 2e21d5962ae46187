"""Schema, organisations, the audit chain and record maintenance."""

from __future__ import annotations

import asyncio
import json
import sys
import typing
from typing import Any

import click

from backend.cli.base import database_url, known_org, main, progress_bar, with_session
from backend.config import get_settings


@main.command()
def migrate() -> None:
    """Upgrade the database to the newest schema."""
    from backend.db import migrate as migrations

    url = database_url()
    migrations.upgrade(url)
    click.echo(f"database at revision {migrations.current_revision(url)}")


def bootstrap_org(url: str, org: str, admin: str) -> dict[str, Any]:
    from backend.db import migrate as migrations
    from backend.domains.orgs import service

    settings = get_settings()
    migrations.upgrade(url)
    return with_session(url, lambda db: service.bootstrap(
        db, org_name=org, admin_email=admin, secret=settings.secret,
        key_retention_days=settings.key_audit_retention_days, ttl_seconds=settings.admin_token_ttl_seconds))


def _checked(value: str, expected: Any, option: str, what: str) -> None:
    """The API's own rule for the value (its shared schema type), so the CLI makes nothing the API would refuse."""
    import msgspec

    try:
        msgspec.convert(value, expected)
    except msgspec.ValidationError as exc:
        raise click.BadParameter(f"{what}: {exc}.", param_hint=option) from None


def check_org_name(org_name: str) -> None:
    """`--org` as the API's own organisation name (1–200 characters), exit 2 naming the option."""
    from shared.schemas.platform import Name

    _checked(org_name, Name, "--org", "an organisation name")


@main.command()
@click.option("--org", "org_name", required=True, help="Organisation name (reused when it exists).")
@click.option("--admin", "admin_email", required=True, help="Administrator e-mail address.")
def bootstrap(org_name: str, admin_email: str) -> None:
    """Create an organisation, its administrator and a full-capability key; print them as JSON."""
    from backend.errors import ApiError
    from shared.schemas.platform import LoginIn

    # The API's rules: a name as organisations are renamed with, an address that can log in.
    check_org_name(org_name)
    _checked(admin_email, typing.get_type_hints(LoginIn, include_extras=True)["email"], "--admin",
             "the address the administrator logs in with")
    try:
        created = bootstrap_org(database_url(), org_name, admin_email)
    except ApiError as exc:
        raise click.ClickException(exc.message) from exc
    click.echo(json.dumps(created))


@main.group()
def audit() -> None:
    """The audit trail."""


@audit.command("verify")
@click.option("--org", "org_id", default=None, help="Only this organisation (default: all).")
def audit_verify(org_id: str | None) -> None:
    """Check every organisation's hash chain; exit 1 when a row was tampered with."""
    from backend.domains.audit import repository, service

    async def work(db: Any) -> list[service.ChainReport]:
        orgs = [await known_org(db, org_id)] if org_id is not None else await repository.org_ids(db)
        return [await service.verify_org(db, o) for o in orgs]

    reports = with_session(database_url(), work)
    broken = False
    for report in reports:
        if report.intact:
            click.echo(f"{report.org_id}: intact ({report.events} events)")
        else:
            broken = True
            click.echo(f"{report.org_id}: BROKEN at seq {report.broken_at_seq}: {report.problem}")
    if broken:
        sys.exit(1)


@main.group()
def memory() -> None:
    """Maintenance of memory records."""


async def _known_options(db: Any, org_id: str | None, index_id: str | None) -> None:
    """A named organisation or index must exist; otherwise "every record has its vector" would be a false answer."""
    from backend.domains.exports import repository as exports

    if org_id is not None:
        await known_org(db, org_id)
    if index_id is not None:
        owner = await exports.org_of_index(db, index_id)
        if owner is None or org_id not in (None, owner):
            where = f" in the organisation {org_id!r}" if org_id is not None else ""
            raise click.ClickException(f"Invalid value for --index: there is no index {index_id!r}{where}.")


@memory.command("reembed")
@click.option("--org", "org_id", default=None, help="Only this organisation (default: all).")
@click.option("--index", "index_id", default=None, help="Only this index.")
@click.option("--batch", default=256, show_default=True, type=click.IntRange(1, 2048),
              help="Records per provider call and per transaction.")
def memory_reembed(org_id: str | None, index_id: str | None, batch: int) -> None:
    """Give records of embedding indexes the vector their write could not get (the provider failed, PLT-13).

    Exits 1 when a provider still fails; what was embedded stays, and running it again continues."""
    from backend.db.engine import make_engine, make_sessionmaker
    from backend.domains.memory import reembed

    async def go() -> list[Any]:
        engine = make_engine(database_url(), pool_size=2)
        try:
            sessions = make_sessionmaker(engine)
            async with sessions() as db:
                await _known_options(db, org_id, index_id)
                total = sum(p["missing"] for p in await reembed.pending(db, org_id, index_id))
            bar = progress_bar(total, "embedding") if sys.stdout.isatty() and total else None

            def advance(rows: int) -> None:
                if bar is not None:
                    bar[0].advance(bar[1], rows)

            try:
                return await reembed.run(sessions, get_settings().secret, org_id=org_id, index_id=index_id,
                                         batch=batch, advance=advance)
            finally:
                if bar is not None:
                    bar[0].stop()
        finally:
            await engine.dispose()

    outcomes = asyncio.run(go())
    if not outcomes:
        click.echo("Every record of every embedding index has its vector.")
    for o in outcomes:
        line = f"{o.org_id} {o.index_id}: {o.embedded} embedded, {o.left} still without a vector"
        click.echo(line + (f" (the provider failed: {o.error})" if o.error else ""))
    if any(o.error for o in outcomes):
        sys.exit(1)


