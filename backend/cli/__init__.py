"""The `coremem` command (PLT-19): one click group; each module adds its subcommands to it."""

from backend.cli import admin, demo, export, mcp, models, running, worker  # noqa: F401  (registers the subcommands)
from backend.cli.base import main

__all__ = ["main"]
