"""The `coremem` command group and what its subcommands share (PLT-19)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import click

from backend.config import get_settings

T = TypeVar("T")
DEMO_ORG = "Demo"
DEMO_ADMIN = "admin@demo.local"
DASHBOARD_PORT = 8501


def database_url() -> str:
    from backend.db.embedded import resolve_database_url

    return resolve_database_url(get_settings())


def with_session(url: str, work: Callable[[Any], Awaitable[T]]) -> T:
    """Run `work(session)` in one transaction on a fresh engine."""
    from backend.db.engine import make_engine, make_sessionmaker

    async def go() -> T:
        engine = make_engine(url, pool_size=2)
        try:
            async with make_sessionmaker(engine)() as session, session.begin():
                return await work(session)
        finally:
            await engine.dispose()

    return asyncio.run(go())


async def known_org(db: Any, org_id: str, option: str = "--org") -> str:
    """An organisation the command names must exist: a typo would otherwise report on, or write under, an id
    nobody has (the API answers 404 for it)."""
    from backend.domains.orgs import repository as orgs

    if await orgs.get(db, org_id) is None:
        raise click.ClickException(f"Invalid value for {option}: there is no organisation {org_id!r}.")
    return org_id


class CoremGroup(click.Group):
    """The command group: a database the command cannot use is one line naming the setting, never a traceback."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Bytes that are not UTF-8 (a terminal in another encoding) reach Python as lone surrogates, which no
        database can store: refused here, naming the option, before any command runs."""
        from backend.errors import storable

        for i, arg in enumerate(args):
            if not storable(arg):
                option = args[i - 1] if i and args[i - 1].startswith("-") else f"argument {i + 1}"
                raise click.UsageError(f"Invalid value for {option}: it holds bytes that are not UTF-8 text (or a "
                                       "NUL); give it in UTF-8.")
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        import psycopg
        from sqlalchemy import exc as sa_exc

        try:
            return super().invoke(ctx)
        except sa_exc.ArgumentError as error:
            raise click.ClickException(f"CORE_DATABASE_URL is not a database address ({error}); set it to a "
                                       "postgresql:// URL, or leave it unset for the embedded database.") from None
        except (sa_exc.OperationalError, sa_exc.InterfaceError, psycopg.OperationalError) as error:
            reason = str(getattr(error, "orig", error)).strip().splitlines()[0]
            raise click.ClickException(f"The database cannot be reached ({reason}); check CORE_DATABASE_URL and "
                                       "that the server is running.") from None
        except sa_exc.ProgrammingError as error:
            if "UndefinedTable" not in type(getattr(error, "orig", error)).__name__:
                raise
            raise click.ClickException("The database has no coremem tables yet: run `coremem migrate` first.") \
                from None


@click.group(cls=CoremGroup)
def main() -> None:
    """coremem: memory and conversation threads for LLM applications."""



def progress_bar(total: int, label: str = "export") -> Any:
    """A rich bar on a terminal: rows done of the rows counted, rate and elapsed time; returns (bar, task)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn, TimeElapsedColumn
    from rich.text import Text

    class Rate(ProgressColumn):
        def render(self, task: Any) -> Text:
            return Text(f"{task.speed or 0:,.0f} rows/s")

    bar = Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TextColumn("rows"), Rate(),
                   TimeElapsedColumn())
    task = bar.add_task(label, total=total)
    bar.start()
    return bar, task


