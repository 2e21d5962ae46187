"""Writing the demo organisation through the API: settings, stores, keys, records, threads, notes, states.

The organisation and its administrator come from `coremem bootstrap` (there is no route that creates an
organisation); everything after that is an ordinary API call through `shared.client.CoreClient`, so the demo
passes the same checks, policies and audit trail as any application's writes. The work is a list of steps
(`STEPS`), each a function of the shared `Demo`; a later step reads what an earlier one made (store and key
ids) from it. The extraction steps (`extraction.py`) switch extraction on with a recorded model before the threads
are written and queue a run after; the job queue's workers then write the records, episodes and lessons it finds.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import httpx

from backend.demo import extraction
from backend.demo.conversations import ThreadSpec, thread_specs
from backend.demo.people import Person, people
from backend.demo.records import RecordSpec, personal_records, shared_records
from backend.demo.settings import KEYS, STORES, TIMEZONE, VOCABULARY, key_body, org_patch
from shared.client import CoreClient
from shared.schemas.memory import Commitment, MemoryBatch, MemoryCreate
from shared.schemas.platform import IndexCreate, KeyCreated
from shared.schemas.threads import NoteIn, StatePut, ThreadCreate

DEFAULT_SEED = 20261215


@dataclass
class Demo:
    """What the steps share: the administrator's client, the organisation, and what earlier steps made."""

    base_url: str
    transport: httpx.BaseTransport | None
    org_id: str
    admin: CoreClient
    writer_key: str  # the bootstrap key: records are written as an application would, not as an administrator
    seed: int
    anchor: date  # the organisation's day the demo is dated from: due dates and expiries count from it
    people: list[Person] = field(default_factory=list)
    stores: dict[str, str] = field(default_factory=dict)  # demo name -> index id
    keys: dict[str, KeyCreated] = field(default_factory=dict)  # demo name -> created key (with its secret)
    counts: Counter[str] = field(default_factory=Counter)

    @contextmanager
    def client(self, secret: str, person: Person | None = None) -> Iterator[CoreClient]:
        """A client for one credential, acting for `person` (or for nobody)."""
        with CoreClient(self.base_url, secret, transport=self.transport) as plain:
            if person is None:
                yield plain
                return
            with plain.for_person(person.id, person.attributes) as personal:
                yield personal

    def at(self, days: int, hour: int) -> datetime:
        return datetime.combine(self.anchor + timedelta(days=days), time(hour), tzinfo=ZoneInfo(TIMEZONE))


def organisation(demo: Demo) -> None:
    """Time zone, decay half-lives, improvements, and the label vocabulary the records and threads use."""
    demo.admin.update_org(demo.org_id, org_patch())
    demo.admin.put_vocabulary(demo.org_id, VOCABULARY)


def stores(demo: Demo) -> None:
    """Three stores with different embeddings and settings."""
    for name, (title, embedding, settings) in STORES.items():
        index = demo.admin.create_index(IndexCreate(name=title, embedding=embedding))
        demo.stores[name] = index.id
        demo.admin.update_store_settings(index.id, settings)
    demo.counts["stores"] = len(demo.stores)


def keys(demo: Demo) -> None:
    """Keys with different capabilities and policies; one revoked, one expiring soon."""
    for name in KEYS:
        demo.keys[name] = demo.admin.create_key(demo.org_id, key_body(name, demo.stores, demo.at(14, 18)))
    demo.admin.revoke_key(demo.org_id, demo.keys["old-mobile-app"].id)
    demo.counts["keys"] = len(demo.keys) + 1  # and the bootstrap key


def _record(demo: Demo, spec: RecordSpec) -> MemoryCreate:
    commitment = None
    if spec.type == "commitment":
        due = demo.at(spec.due_in_days, 9) if spec.due_in_days is not None else None
        commitment = Commitment(status=spec.status, due_at=due, promised_to=spec.promised_to)  # type: ignore[arg-type]
    extra: dict[str, Any] = {}
    if spec.key is not None:
        extra["key"] = spec.key
    if spec.confidence is not None:
        extra["confidence"] = spec.confidence
    if spec.expires_in_days is not None:
        extra["expires_at"] = demo.at(spec.expires_in_days, 18)
    if commitment is not None:
        extra["commitment"] = commitment
    return MemoryCreate(index_id=demo.stores[spec.store], type=spec.type, text=spec.text, tags=list(spec.tags),
                        priority=spec.priority, metadata=dict(spec.metadata),  # type: ignore[arg-type]
                        labels=dict(spec.labels), **extra)


def records(demo: Demo) -> None:
    """Each person's records in one batch written for her, then the shared records in one batch."""
    demo.people = people()
    for person in demo.people:
        specs = personal_records(person, demo.seed)
        with demo.client(demo.writer_key, person) as client:
            client.write_memory_batch(MemoryBatch(records=[_record(demo, s) for s in specs]))
        demo.counts["records"] += len(specs)
    shared = shared_records()
    with demo.client(demo.writer_key) as client:
        client.write_memory_batch(MemoryBatch(records=[_record(demo, s) for s in shared]))
    demo.counts["records"] += len(shared)
    demo.counts["shared records"] = len(shared)
    demo.counts["people"] = len(demo.people)


def _thread(demo: Demo, spec: ThreadSpec) -> None:
    secret = demo.keys[spec.key].secret
    with demo.client(secret, spec.owner) as client:
        created = client.create_thread(ThreadCreate(metadata=spec.metadata, labels=spec.labels, items=spec.items))
        for position, note, by_owner in spec.notes:
            if by_owner:
                client.put_note(created.id, created.items[position].id, NoteIn(metadata=note))
        if spec.state is not None:
            client.put_thread_state(created.id, StatePut(state=spec.state))
    reviews = [(position, note) for position, note, by_owner in spec.notes if not by_owner]
    if reviews:  # the organisation's own notes: quality reviewers working with the operations key
        with demo.client(demo.keys["operations"].secret) as reviewer:
            for position, note in reviews:
                reviewer.put_note(created.id, created.items[position].id, NoteIn(metadata=note))
    demo.counts["threads"] += 1
    demo.counts["notes"] += len(spec.notes)


def threads(demo: Demo) -> None:
    """One conversation per person through the key of the assistant she talked to, and shared team threads."""
    for spec in thread_specs(demo.people or people(), demo.seed):
        _thread(demo, spec)


Step = Callable[[Demo], None]
STEPS: list[Step] = [organisation, stores, keys, records, extraction.switch_on, threads, extraction.run]


def build(demo: Demo, steps: list[Step] | None = None) -> Counter[str]:
    """Run the steps in order; answers what was made, by kind."""
    for step in STEPS if steps is None else steps:
        step(demo)
    return demo.counts
