"""`coremem worker`: runs background jobs (compaction summaries, ...) from the PostgreSQL job queue."""

from __future__ import annotations

import asyncio
import logging

import click

from backend.cli.base import database_url, main
from backend.config import get_settings

DEFAULT_CONCURRENCY = 4


@main.command()
@click.option("--concurrency", default=DEFAULT_CONCURRENCY, show_default=True, type=click.IntRange(1, 256),
              help="Jobs run at the same time by this worker.")
def worker(concurrency: int) -> None:
    """Run a worker for background jobs; start as many as you like, on any machine, against one database.
    SIGINT or SIGTERM stops it after its running jobs (at most 30 s; the rest are retried)."""
    from backend.db import migrate as migrations
    from backend.jobs.worker import run_worker

    settings = get_settings()
    logging.basicConfig(level=settings.log_level)
    url = database_url()
    if migrations.current_revision(url) != migrations.head_revision():
        raise click.ClickException("The database schema is behind this release; run `coremem migrate` first.")
    click.echo(f"Worker running {concurrency} job(s) at a time; stop it with Ctrl-C.")
    asyncio.run(run_worker(url, settings, concurrency=concurrency))

