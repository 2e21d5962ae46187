"""Row-level security's organisation (issue 17 item 11): every transaction on an application session says which
organisation it works for, in the transaction-local setting `core.org_id` that the tenant tables' policies read
(migration 0016). Nothing set means no tenant row is visible or writable."""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, event, func, literal, text, true
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session

APP_ROLE = "coremem_app"
SETTING = "core.org_id"
_INFO_KEY = "core_org_id"
_SET_IN_KEY = "core_org_set_in"  # the transaction in which a credential's statement already set it
_SET = text("SELECT set_config('core.org_id', :org_id, true)")
_SET_DRIVER_SQL = "SELECT set_config('core.org_id', %(org_id)s, true)"
EVERY_ORG = ""  # rows offered to every organisation (models with org_id ''); writable with this set


async def use_org(db: AsyncSession, org_id: str) -> None:
    """Work for `org_id` from now on: in the open transaction (if any) and in every later one of this session."""
    already = db.info.get(_INFO_KEY) == org_id and db.info.get(_SET_IN_KEY) is db.sync_session.get_transaction()
    db.info[_INFO_KEY] = org_id
    if db.in_transaction() and not already:
        await db.execute(_SET, {"org_id": org_id})


def setting_org(org_id: ColumnElement[str]) -> ColumnElement[str]:
    """A column that sets the organisation as its row is read: a credential's statement sets its organisation in
    its own round trip, and `org_was_set` spares `use_org` a second one. Evaluated only for rows the statement
    returns, so a credential that is not found sets nothing."""
    return func.set_config(literal(SETTING), org_id, true()).label("org_set")


def org_was_set(db: AsyncSession, org_id: str) -> None:
    """Note that a statement with `setting_org` returned `org_id`'s row in the open transaction."""
    db.info[_INFO_KEY] = org_id
    db.info[_SET_IN_KEY] = db.sync_session.get_transaction()


def current_org(db: AsyncSession) -> str | None:
    found: str | None = db.info.get(_INFO_KEY)
    return found


@event.listens_for(Session, "after_begin")
def _apply_org(session: Session, _transaction: Any, connection: Any) -> None:
    """A session that has an organisation sets it again in each transaction it begins (turns and jobs commit
    between their steps); `set_config(…, true)` ends with the transaction."""
    org_id = session.info.get(_INFO_KEY)
    if org_id is not None:  # driver SQL: SQLAlchemy's compile and result steps cost more than the statement
        connection.exec_driver_sql(_SET_DRIVER_SQL, {"org_id": org_id})


_ORG_IDS = text("SELECT id FROM orgs ORDER BY id")


async def every_org_id(db: AsyncSession) -> list[str]:
    """Every organisation's id, from the control plane (no row-level security there): what the system paths that
    cross organisations (the scheduler, audit verification, re-embedding) loop over, one organisation at a time."""
    return [row[0] for row in (await db.execute(_ORG_IDS)).all()]
