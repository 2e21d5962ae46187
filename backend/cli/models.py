"""`coremem models add/remove`: the chat models offered to organisations (EXT-1)."""

from __future__ import annotations

import json
from typing import Any

import click

from backend.cli.base import database_url, known_org, main, with_session


@main.group()
def models() -> None:
    """Chat models offered to organisations."""


@models.command("add")
@click.argument("model_id")
@click.option("--provider", type=click.Choice(["openai_compatible", "replay"]), required=True)
@click.option("--base-url", default=None, help="The server's address, such as http://127.0.0.1:11434/v1.")
@click.option("--api-key-env", default=None, help="The environment variable holding the server's API key.")
@click.option("--model", "name", default=None, help="The name sent to the server (default: MODEL_ID); for replay, "
                                                    "the recording.")
@click.option("--org", "org_id", default=None, help="Offer it to this organisation only (default: every one).")
def models_add(model_id: str, provider: str, base_url: str | None, api_key_env: str | None, name: str | None,
               org_id: str | None) -> None:
    """Offer a chat model; adding an id again replaces its settings."""
    import msgspec

    from backend.domains.models import service
    from backend.errors import ApiError
    from shared.schemas.turns import ModelCreate

    async def work(db: Any) -> dict[str, Any]:
        if org_id is not None:
            await known_org(db, org_id)
        return await service.add(db, body, org_id)

    try:
        body = msgspec.convert({"id": model_id, "provider": provider, "base_url": base_url,
                                "api_key_env": api_key_env, "model": name}, ModelCreate)
        row = with_session(database_url(), work)
    except msgspec.ValidationError as exc:
        raise click.BadParameter(str(exc)) from exc
    except ApiError as exc:
        hint = "MODEL_ID" if exc.param in (None, "id") else f"--{exc.param.replace('_', '-')}"
        raise click.BadParameter(exc.message, param_hint=hint) from exc
    click.echo(json.dumps(service.document(row), default=str))


@models.command("remove")
@click.argument("model_id")
@click.option("--org", "org_id", default=None, help="The organisation it was offered to (default: every one).")
def models_remove(model_id: str, org_id: str | None) -> None:
    """Stop offering a chat model."""
    from backend.domains.models import repository

    async def work(db: Any) -> bool:
        if org_id is not None:
            await known_org(db, org_id)
        return await repository.remove(db, org_id or repository.EVERY_ORG, model_id)

    if not with_session(database_url(), work):
        raise click.ClickException(f"No model {model_id!r} is offered to "
                                   f"{'organisation ' + org_id if org_id else 'every organisation'}.")
    click.echo(f"{model_id} is no longer offered.")
