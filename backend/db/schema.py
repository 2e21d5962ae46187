"""Every ORM model module, imported together so Alembic and the drift check see the whole schema."""

from backend.db import models, models_agents, models_memory, models_stores, models_threads  # noqa: F401
from backend.db.models import Base

metadata = Base.metadata
