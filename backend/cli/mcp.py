"""`coremem mcp --stdio`: the MCP server for a desktop assistant that starts a local process."""

from __future__ import annotations

import asyncio
import os
import sys

import click

from backend.cli.base import database_url, main
from backend.config import get_settings, secret_exists
from backend.errors import ApiError


@main.command()
@click.option("--stdio", is_flag=True, help="Serve MCP over stdin and stdout (the only transport this command has).")
def mcp(stdio: bool) -> None:
    """Serve the memory and thread tools over MCP for one credential.

    The credential comes from the environment: CORE_MCP_KEY (a key's secret or a subject token) and, for a key,
    CORE_MCP_SUBJECT (the person: an id, or the X-Core-Subject JSON with attributes). The database is the one
    `coremem serve` uses. Over HTTP, `coremem serve` already answers MCP at /mcp.
    """
    from backend.mcp.credential import MissingCredential, credential_from_env

    if not stdio:
        raise click.UsageError("Pass --stdio; over HTTP the API serves MCP at /mcp (coremem serve).")
    if not secret_exists():
        # A new secret would sign nothing the API issued and hash people in the audit trail under another key.
        raise click.UsageError("Set CORE_SECRET to the API's (or CORE_DATA_DIR to the directory holding it).")
    try:
        credential = credential_from_env(os.environ)
    except MissingCredential as exc:
        raise click.UsageError(str(exc)) from None
    from backend.mcp.stdio import serve

    try:
        asyncio.run(serve(get_settings(), database_url(), credential))
    except ApiError as exc:
        click.echo(f"coremem mcp: {exc.message} ({exc.status} {exc.code})", err=True)
        sys.exit(2)
