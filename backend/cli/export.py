"""`coremem export` (EXP-1)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

import click

from backend.cli.base import database_url, main, progress_bar
from backend.config import get_settings
from shared.schemas.common import has_utc_time

FORMAT_CHOICE = click.Choice(["parquet", "csv", "ndjson"])


def _instant(value: str | None, name: str) -> Any:
    """An instant on the command line: RFC 3339 with an offset (`2026-01-31T09:00:00Z`), like the API's."""
    from datetime import datetime

    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError as exc:
        raise click.BadParameter(f"{value!r} is not an RFC 3339 instant.", param_hint=name) from exc
    if parsed.tzinfo is None:
        raise click.BadParameter("an instant needs its offset, such as `...Z` or `...+01:00`.", param_hint=name)
    if not has_utc_time(parsed):
        raise click.BadParameter("an instant needs a UTC time within years 1–9999.", param_hint=name)
    return parsed


def _bar() -> Any:
    """The export's progress as a rich bar on a terminal: rows of the counted total, rate, elapsed time."""
    from backend.domains.exports.to_file import Progress

    class Bar(Progress):
        def __init__(self) -> None:
            self.bar: Any = None

        def start(self, total: int) -> None:
            self.bar = progress_bar(total)

        def advance(self, rows: int) -> None:
            self.bar[0].advance(self.bar[1], rows)

        def stop(self) -> None:
            if self.bar is not None:
                self.bar[0].stop()

    return Bar()


def _export(kind: str, fmt: str, out: str, org_id: str | None, **filters: Any) -> int:
    from backend.domains.exports.to_file import export_to_file
    from backend.errors import ApiError

    try:
        return export_to_file(database_url(), get_settings().secret, kind, fmt, out, org_id=org_id,
                              progress=_bar() if sys.stdout.isatty() else None, **filters)
    except ApiError as exc:
        if exc.code == "org_required":
            raise click.UsageError(exc.message) from exc
        option = f"Invalid value for --{exc.param}: " if exc.param in _OPTIONS else ""
        raise click.ClickException(option + exc.message) from exc


_OPTIONS = ("org", "index", "thread", "subject", "type", "shared")  # the errors' params that are option names


def _types(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple[str, ...]:
    """Type names as `GET /memory?type=` takes them: a misspelt one is refused, not an empty export."""
    import msgspec

    from shared.schemas.memory import MemoryType

    for name in value:
        try:
            msgspec.convert(name, MemoryType)
        except msgspec.ValidationError:
            raise click.BadParameter(f"{name!r} is no type name: lowercase letters, digits and `_`, starting with a "
                                     "letter, at most 32 (such as `fact` or `preference`).", ctx, param) from None
    return value


def _out(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """The file is written beside itself (a `.part` file, then renamed): its directory must exist and be writable,
    and its name be one the file system takes."""
    if not value or os.path.isdir(value):
        raise click.BadParameter("name the file to write, such as records.parquet.", ctx, param)
    directory = os.path.dirname(os.path.abspath(value))
    click.Path(exists=True, file_okay=False, writable=True).convert(directory, param, ctx)
    if len(os.path.basename(value).encode()) > os.pathconf(directory, "PC_NAME_MAX"):
        raise click.BadParameter("the file name is longer than this file system takes.", ctx, param)
    return value


@main.group()
def export() -> None:
    """Export records or thread items for analysts (Parquet, CSV, NDJSON; docs/export.md)."""


def _export_options(command: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed([
        click.option("--org", "org_id", default=None,
                     help="Organisation id; the export sees all of it. Needed only when the index or thread named, "
                          "or the database's only organisation, does not say."),
        click.option("--format", "fmt", type=FORMAT_CHOICE, default="parquet", show_default=True),
        click.option("--out", required=True, type=click.Path(dir_okay=False, writable=True), callback=_out,
                     help="File to write (its directory must exist)."),
        click.option("--since", default=None, help="Created at or after this instant (RFC 3339 with offset)."),
        click.option("--until", default=None, help="Created before this instant."),
    ]):
        command = option(command)
    return command


@export.command("records")
@_export_options
@click.option("--index", "index_id", default=None, help="Only this index.")
@click.option("--type", "types", multiple=True, callback=_types, help="Only this type (repeatable).")
@click.option("--subject", default=None, help="Only this person's records.")
@click.option("--shared", is_flag=True, help="Only shared records (nobody's).")
@click.option("--include-expired", is_flag=True, help="Also records past `expires_at`.")
@click.option("--include-replaced", is_flag=True, help="Also records a correction replaced.")
def export_records(org_id: str | None, fmt: str, out: str, since: str | None, until: str | None, index_id: str | None,
                   types: tuple[str, ...], subject: str | None, shared: bool, include_expired: bool,
                   include_replaced: bool) -> None:
    """Memory records as `GET /memory` shows them to an administrator, with effective confidence (EXP-1)."""
    from shared.schemas.memory import MemoryQuery

    if subject is not None and shared:
        raise click.UsageError("--subject and --shared exclude each other.")
    f = MemoryQuery(index_id=index_id, type=list(types), subject=subject, shared=shared,
                    after=_instant(since, "--since"), before=_instant(until, "--until"),
                    include_expired=include_expired, include_replaced=include_replaced)
    rows = _export("records", fmt, out, org_id, records=f)
    click.echo(f"{rows} records written to {out}")


@export.command("thread-items")
@_export_options
@click.option("--thread", "thread_id", default=None, help="Only this thread.")
@click.option("--subject", default=None, help="Only items this person wrote.")
def export_thread_items(org_id: str | None, fmt: str, out: str, since: str | None, until: str | None,
                        thread_id: str | None, subject: str | None) -> None:
    """Items of the organisation's threads, by thread and position (EXP-1)."""
    from backend.domains.exports.service import ItemFilters

    items = ItemFilters(thread_id, subject, _instant(since, "--since"), _instant(until, "--until"))
    rows = _export("thread_items", fmt, out, org_id, items=items)
    click.echo(f"{rows} thread items written to {out}")


