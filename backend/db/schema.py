"""Every ORM model module, imported together so Alembic and the drift check see the whole schema."""

from backend.db import (  # noqa: F401
    models,
    models_agents,
    models_memory,
    models_stores,
    models_threads,
    models_turns,
)
from backend.db.models import Base

metadata = Base.metadata
