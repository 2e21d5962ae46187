"""message search: a longer list of frequent words in the statistics of messages

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-04 18:20:00
"""

from __future__ import annotations

from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A search page reads one slice of history newest first (THR-7). For a word off the statistics' list of
    # frequent words, PostgreSQL guesses its share of the messages from the rarest word on the list. With the
    # default list (target 100) that guess was 4,335 messages of 5,000,000 for a word in 457, so the planner walked
    # the whole week in time order with the word as a filter (30 ms) instead of reading the word's few messages
    # through the GIN index (3 ms). Target 300 picks the index with a tenfold cost margin at 5M messages (200: 4×,
    # 1000: 130×); each plan of a search reads the list, which costs 0.07 ms more than at 100 (1000: 0.28 ms).
    # ANALYZE then samples 90,000 rows; the column is analysed here, since a large table that grows slowly may
    # wait long for autovacuum's next ANALYZE. Measured in bench/results/search-5m.md and docs/performance.md.
    op.execute("ALTER TABLE thread_items ALTER COLUMN tsv SET STATISTICS 300")
    op.execute("ANALYZE thread_items (tsv)")


def downgrade() -> None:
    op.execute("ALTER TABLE thread_items ALTER COLUMN tsv SET STATISTICS -1")
