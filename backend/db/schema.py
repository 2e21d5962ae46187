"""Every ORM model module, imported together so Alembic and the drift check see the whole schema."""

from typing import Any

from backend.db import (  # noqa: F401
    models,
    models_agents,
    models_extraction,
    models_memory,
    models_proposals,
    models_stores,
    models_threads,
    models_turns,
)
from backend.db.models import Base

metadata = Base.metadata
QUEUE_TABLE_PREFIX = "procrastinate_"


def include_object(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
    """What Alembic compares with the models: everything but the job queue's tables. Those are procrastinate's
    own schema (migration 0013 applies it as the library ships it), not models of ours."""
    table = obj if type_ == "table" else getattr(obj, "table", None)
    table_name = name if type_ == "table" else getattr(table, "name", None)
    return not (table_name or "").startswith(QUEUE_TABLE_PREFIX)
