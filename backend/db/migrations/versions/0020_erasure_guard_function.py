"""erasure guard in one round trip: a function that takes the people's shared locks, then reads erasures

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-05 18:40:00
"""

from __future__ import annotations

from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

# The lock key is the one `erasure.repository._subject_lock` computes, which the erasure takes exclusively.
GUARD_FUNCTION = r"""
CREATE FUNCTION coremem_erased_after_locking(org text, hashes text[], since timestamptz) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  -- The shared side of each person's lock, in the order given (callers sort, so two writers never cross).
  PERFORM pg_advisory_xact_lock_shared(hashtextextended('subject:' || org || ':' || held.h, 0))
    FROM unnest(hashes) WITH ORDINALITY AS held(h, n) ORDER BY held.n;
  -- Each query of a VOLATILE function takes a fresh snapshot, so this one sees an erasure that committed while
  -- the lock above waited for it; one statement doing both would not (its snapshot predates the wait).
  RETURN EXISTS (SELECT FROM erased_subjects WHERE org_id = org AND subject_hash = ANY (hashes)
                 AND erased_at > coalesce(since, now()));
END
$$
"""


def upgrade() -> None:
    op.execute(GUARD_FUNCTION)
    op.execute("GRANT EXECUTE ON FUNCTION coremem_erased_after_locking(text, text[], timestamptz) TO coremem_app")


def downgrade() -> None:
    op.execute("DROP FUNCTION coremem_erased_after_locking(text, text[], timestamptz)")
