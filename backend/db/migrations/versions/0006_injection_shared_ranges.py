"""injection: index ranges for a store's shared records (by confidence, and open commitments by due time)

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02 13:45:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

OPEN_COMMITMENT = "type = 'commitment' AND status = 'active' AND (commitment ->> 'status') = 'open'"

# A commitment's due time. The service writes due_at in UTC with a `Z`; a string without an offset (which
# would depend on the session's time zone) or in another shape reads as no due time, so the function is
# immutable and can be indexed.
DUE_FUNCTION = r"""
CREATE FUNCTION coremem_commitment_due(commitment jsonb) RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE RETURNS NULL ON NULL INPUT AS $$
  SELECT CASE WHEN (commitment ->> 'due_at') ~ '^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}(:?\d{2})?)$'
              THEN (commitment ->> 'due_at')::timestamptz END
$$
"""


def upgrade() -> None:
    # `subject IS NULL` is no equality for the planner, so the (org_id, index_id, subject, …) indexes cannot
    # hand over a store's shared records in rank order; these partial indexes can. The organisation section
    # then reads a short range by confidence (about 500 ms to 20 ms at 200,000 shared records), and the
    # commitments section reads hers and the shared ones soonest due first instead of sorting them all.
    op.create_index("ix_memory_records_shared_confidence", "memory_records", ["org_id", "index_id", "confidence"],
                    unique=False, postgresql_where=sa.text("status = 'active' AND subject IS NULL"))
    op.execute(DUE_FUNCTION)
    op.drop_index("ix_memory_records_open_commitments", table_name="memory_records")
    op.create_index("ix_memory_records_open_commitments", "memory_records",
                    ["org_id", "index_id", "subject", sa.text("coremem_commitment_due(commitment)")],
                    unique=False, postgresql_where=sa.text(OPEN_COMMITMENT))
    op.create_index("ix_memory_records_shared_open_commitments", "memory_records",
                    ["org_id", "index_id", sa.text("coremem_commitment_due(commitment)")],
                    unique=False, postgresql_where=sa.text(OPEN_COMMITMENT + " AND subject IS NULL"))


def downgrade() -> None:
    op.drop_index("ix_memory_records_shared_open_commitments", table_name="memory_records")
    op.drop_index("ix_memory_records_open_commitments", table_name="memory_records")
    op.create_index("ix_memory_records_open_commitments", "memory_records", ["org_id", "index_id", "subject"],
                    unique=False, postgresql_where=sa.text(OPEN_COMMITMENT))
    op.execute("DROP FUNCTION coremem_commitment_due(jsonb)")
    op.drop_index("ix_memory_records_shared_confidence", table_name="memory_records")
