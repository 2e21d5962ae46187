"""memory search: words with stems and without English or Dutch stop words; the model each vector came from

Two text search configurations, `coremem_en` and `coremem_nl`: each drops the other language's stop words first,
then stems with its own language's Snowball stemmer (which drops its own stop words). A record's `search` vector
holds both stemmings of its text, so a question in plain words finds "allergic" from "allergies" and Dutch
"allergisch" from "allergie" (MEM-13). `embedding_model` names the embedding setting a vector was made with, so
search never compares vectors of an old model with a new one and re-embedding finds the stale ones (PLT-13).

Revision ID: 0010
Revises: 0007
Create Date: 2026-12-03 08:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0010"
down_revision = "0011"
branch_labels = None
depends_on = None

WORD_TOKENS = "asciiword, word, asciihword, hword, hword_asciipart, hword_part"
STEMMED = "to_tsvector('coremem_en'::regconfig, text) || to_tsvector('coremem_nl'::regconfig, text)"
SIMPLE = "to_tsvector('simple'::regconfig, text)"


def _search_column(expression: str) -> None:
    op.drop_index("ix_memory_records_search", table_name="memory_records", postgresql_using="gin")
    op.drop_column("memory_records", "search")
    op.add_column("memory_records", sa.Column("search", postgresql.TSVECTOR(),
                                              sa.Computed(expression, persisted=True), nullable=True))
    op.create_index("ix_memory_records_search", "memory_records", ["search"], unique=False, postgresql_using="gin")


def upgrade() -> None:
    # Stop-word filters: a stop word of the language is dropped, any other word goes on to the next dictionary.
    op.execute("CREATE TEXT SEARCH DICTIONARY coremem_en_stop (TEMPLATE = simple, STOPWORDS = english, "
               "ACCEPT = false)")
    op.execute("CREATE TEXT SEARCH DICTIONARY coremem_nl_stop (TEMPLATE = simple, STOPWORDS = dutch, ACCEPT = false)")
    op.execute("CREATE TEXT SEARCH CONFIGURATION coremem_en (COPY = english)")
    op.execute(f"ALTER TEXT SEARCH CONFIGURATION coremem_en ALTER MAPPING FOR {WORD_TOKENS} "
               "WITH coremem_nl_stop, english_stem")
    op.execute("CREATE TEXT SEARCH CONFIGURATION coremem_nl (COPY = dutch)")
    op.execute(f"ALTER TEXT SEARCH CONFIGURATION coremem_nl ALTER MAPPING FOR {WORD_TOKENS} "
               "WITH coremem_en_stop, dutch_stem")
    _search_column(STEMMED)
    op.add_column("memory_records", sa.Column("embedding_model", sa.Text(), nullable=True))
    # Vectors written before this revision were made with their index's setting of the time, the current one.
    op.execute("UPDATE memory_records r SET embedding_model = i.embedding ->> 'provider' || '/' || "
               "(i.embedding ->> 'model') || '/' || (i.embedding ->> 'dimensions') "
               "FROM indexes i WHERE i.org_id = r.org_id AND i.id = r.index_id AND r.embedding IS NOT NULL "
               "AND i.embedding IS NOT NULL")


def downgrade() -> None:
    op.drop_column("memory_records", "embedding_model")
    _search_column(SIMPLE)
    op.execute("DROP TEXT SEARCH CONFIGURATION coremem_nl")
    op.execute("DROP TEXT SEARCH CONFIGURATION coremem_en")
    op.execute("DROP TEXT SEARCH DICTIONARY coremem_nl_stop")
    op.execute("DROP TEXT SEARCH DICTIONARY coremem_en_stop")
