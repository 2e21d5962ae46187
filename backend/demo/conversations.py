"""The demo's threads: conversations of customers and employees with the company's assistants, and a few shared
team threads, in Dutch and English, with notes on messages and working state.

A pure function of the seed and the people: the same inputs give the same threads.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from backend.demo.people import Person
from backend.demo.records import BIKES, ONDERDELEN, PARTS, WEEKDAGEN, WEEKDAYS
from shared.schemas.threads import FunctionCallIn, FunctionCallOutputIn, ItemIn, MessageIn, RefusalIn

NoteValue = str | int | float | bool


@dataclass(frozen=True)
class ThreadSpec:
    """One thread as the demo writes it: through which demo key, for whom, and what it holds."""

    key: str  # the demo key that writes it: "support", "sales", "people" or "operations"
    owner: Person | None  # None: a shared thread of the organisation
    metadata: dict[str, str]
    labels: dict[str, str | list[str]]
    items: list[ItemIn]
    # (position of a message, note); the owner writes hers, the organisation its own (`by_owner=False`)
    notes: list[tuple[int, dict[str, NoteValue], bool]] = field(default_factory=list)
    state: dict[str, Any] | None = None


def _user(text: str) -> MessageIn:
    return MessageIn(role="user", content=text)


def _assistant(text: str) -> MessageIn:
    return MessageIn(role="assistant", content=text)


def _lookup(call_id: str, order: str, status: str) -> list[ItemIn]:
    return [FunctionCallIn(call_id=call_id, name="lookup_order", arguments=json.dumps({"order": order})),
            FunctionCallOutputIn(call_id=call_id, name="lookup_order",
                                 output=json.dumps({"order": order, "status": status}))]


def _rating(rng: random.Random) -> dict[str, NoteValue]:
    stars = rng.choice([2, 4, 4, 5, 5, 3])
    return {"score": "positive" if stars >= 4 else "negative", "stars": stars}


def _refund(p: Person, rng: random.Random, order: str) -> tuple[list[ItemIn], dict[str, Any] | None]:
    amount = rng.choice([89, 129, 249, 45])
    if p.language == "nl":
        return [
            _user(f"Hoi, ik heb de {rng.choice(ONDERDELEN)} vorige week teruggestuurd. Wanneer komt mijn "
                  "terugbetaling?"),
            *_lookup(f"call_{order}", order, "return_received"),
            _assistant(f"Hoi {p.first}, je retour van bestelling {order} is binnen. De terugbetaling van "
                       f"{amount} euro staat binnen vijf werkdagen op je rekening."),
            _user("Top, en krijg ik daar nog een bevestiging van?"),
            _assistant("Ja, je krijgt een e-mail zodra de terugbetaling is verwerkt."),
        ], None
    return [
        _user(f"Hi, I sent the {rng.choice(PARTS)} back last week. When will I get my refund?"),
        *_lookup(f"call_{order}", order, "return_received"),
        _assistant(f"Hi {p.first}, your return for order {order} has arrived. The refund of {amount} euros reaches "
                   "your account within five working days."),
        _user("Great, will I get a confirmation?"),
        _assistant("Yes, you will get an e-mail as soon as the refund is processed."),
    ], None


def _battery(p: Person, rng: random.Random, order: str) -> tuple[list[ItemIn], dict[str, Any] | None]:
    km = rng.choice([18, 22, 25, 30])
    if p.language == "nl":
        return [
            _user(f"Mijn accu is na {km} km al leeg, terwijl er 80 km beloofd werd. Is hij kapot?"),
            _assistant("Dat is te weinig. Laad je de accu volledig op, en rijd je veel in de hoogste "
                       "ondersteuningsstand?"),
            _user("Ja, altijd vol, en meestal in stand turbo tegen de wind in."),
            _assistant("Turbo kost veel stroom, maar dit is nog steeds laag. We testen de accu gratis binnen de "
                       "garantie; zal ik een afspraak inplannen?"),
            _user(f"Graag, het liefst op {rng.choice(WEEKDAGEN)}."),
        ], {"goal": "Accu testen onder garantie", "order": order, "step": "afspraak inplannen",
            "done": ["laadgedrag nagevraagd"]}
    return [
        _user(f"My battery is empty after {km} km, but the spec says 80 km. Is it broken?"),
        _assistant("That is too little. Do you charge it fully, and do you ride mostly in the highest assist mode?"),
        _user("Always full, and mostly in turbo against the wind."),
        _assistant("Turbo uses a lot, but this is still low. We test the battery for free under warranty; shall I "
                   "book an appointment?"),
        _user(f"Yes please, preferably on a {rng.choice(WEEKDAYS)}."),
    ], {"goal": "Test the battery under warranty", "order": order, "step": "book appointment",
        "done": ["asked about charging"]}


def _service(p: Person, rng: random.Random, order: str) -> tuple[list[ItemIn], dict[str, Any] | None]:
    bike = rng.choice(BIKES)
    if p.language == "nl":
        return [
            _user(f"Mijn {bike} moet een onderhoudsbeurt. Kan dat in {p.city}?"),
            _assistant("Zeker. Een onderhoudsbeurt duurt één werkdag. Zullen we de fiets ophalen? Binnen 15 km is "
                       "dat gratis."),
            _user("Ophalen graag, ik werk thuis."),
            _assistant("Genoteerd: ophalen op je adres, en je krijgt een sms als hij klaar is."),
        ], {"goal": "Onderhoudsbeurt plannen", "bike": bike, "step": "ophaaldag bevestigen"}
    return [
        _user(f"My {bike} needs a service. Can you do that in {p.city}?"),
        _assistant("Certainly. A standard service takes one working day. Shall we pick the bike up? It is free within "
                   "15 km."),
        _user("A pick-up would be great, I work from home."),
        _assistant("Noted: pick-up at your address, and a text message when it is ready."),
    ], {"goal": "Book a service", "bike": bike, "step": "confirm pick-up day"}


def _delivery(p: Person, rng: random.Random, order: str) -> tuple[list[ItemIn], dict[str, Any] | None]:
    n = rng.randrange(len(PARTS))
    if p.language == "nl":
        return [
            _user(f"Waar blijft de {ONDERDELEN[n]} van bestelling {order}? Hij zou er gisteren zijn."),
            *_lookup(f"call_{order}", order, "delayed_at_supplier"),
            _assistant("Sorry, de leverancier is te laat. We bellen je terug zodra we een nieuwe datum hebben."),
            _user("Graag vóór het weekend, ik heb de fiets nodig."),
        ], None
    return [
        _user(f"Where is the {PARTS[n]} for order {order}? It was due yesterday."),
        *_lookup(f"call_{order}", order, "delayed_at_supplier"),
        _assistant("Sorry, the supplier is late. We will call you back as soon as we have a new date."),
        _user("Before the weekend please, I need the bike."),
    ], None


def _privacy(p: Person, rng: random.Random, order: str) -> tuple[list[ItemIn], dict[str, Any] | None]:
    if p.language == "nl":
        return [
            _user("Mijn buurman heeft dezelfde fiets gekocht. Wat is zijn adres, dan breng ik zijn lader terug?"),
            RefusalIn(refusal="Ik kan geen gegevens van andere klanten delen."),
            _assistant("Je kunt de lader bij een servicepunt afgeven; wij zorgen dat hij terugkomt."),
        ], None
    return [
        _user("My neighbour bought the same bike. What is his address, so I can return his charger?"),
        RefusalIn(refusal="I cannot share other customers' details."),
        _assistant("You can drop the charger at any service point and we will make sure it gets back."),
    ], None


def _lease(p: Person, rng: random.Random, order: str) -> tuple[list[ItemIn], dict[str, Any] | None]:
    if p.language == "nl":
        return [
            _user("Mijn werkgever biedt een leasefiets aan. Hoe werkt dat bij jullie?"),
            _assistant("Een leasecontract via de werkgever loopt 36 maanden, inclusief verzekering en onderhoud. Deze "
                       "maand krijg je 10% korting op het eerste jaar."),
            _user("Kan ik mijn huidige fiets inruilen?"),
            _assistant("Ja, een werkende e-bike jonger dan vijf jaar levert minstens 250 euro op."),
        ], {"goal": "Leaseofferte", "step": "werkgever opvragen"}
    return [
        _user("My employer offers a lease bike. How does that work with you?"),
        _assistant("An employer lease runs for 36 months and includes insurance and service. This month the first "
                   "year is 10% off."),
        _user("Can I trade in my current bike?"),
        _assistant("Yes, a working e-bike younger than five years is worth at least 250 euros."),
    ], {"goal": "Lease quote", "step": "ask for employer details"}


def _holiday(p: Person, rng: random.Random, order: str) -> tuple[list[ItemIn], dict[str, Any] | None]:
    weeks = rng.choice([2, 3])
    if p.language == "nl":
        return [
            _user(f"Ik wil deze zomer {weeks} weken op vakantie. Hoeveel dagen heb ik nog?"),
            _assistant("Dat staat in je saldo bij personeelszaken. Let op: meer dan twee weken vraag je een maand "
                       "van tevoren aan."),
            _user("Dan dien ik het vandaag nog in."),
        ], None
    return [
        _user(f"I want to take {weeks} weeks off this summer. How many days do I have left?"),
        _assistant("Your balance is with the people team. Note that more than two weeks needs approval a month in "
                   "advance."),
        _user("Then I will send the request today."),
    ], None


def _expenses(p: Person, rng: random.Random, order: str) -> tuple[list[ItemIn], dict[str, Any] | None]:
    if p.language == "nl":
        return [
            _user("Wanneer moet mijn reiskostendeclaratie binnen zijn?"),
            _assistant("Uiterlijk de vijfde werkdag van de volgende maand. Het salaris volgt op de 25e."),
        ], None
    return [
        _user("When is my travel expense claim due?"),
        _assistant("By the fifth working day of the next month. Salaries follow on the 25th."),
    ], None


Script = Callable[[Person, random.Random, str], tuple[list[ItemIn], dict[str, Any] | None]]
CUSTOMER_SCRIPTS: list[tuple[str, str, Script]] = [
    ("support", "refund", _refund), ("support", "battery", _battery), ("support", "service", _service),
    ("support", "delivery", _delivery), ("support", "privacy", _privacy), ("sales", "lease", _lease),
]
EMPLOYEE_SCRIPTS: list[tuple[str, str, Script]] = [("people", "holiday", _holiday), ("people", "expenses", _expenses)]
CHANNELS = ["chat", "e-mail", "whatsapp"]


def _shared_threads() -> list[ThreadSpec]:
    return [
        ThreadSpec("support", None, {"topic": "handover", "channel": "team"}, {"department": "support"}, [
            _user("Handover for the late shift: two battery tests waiting, one Cargo Duo with a motor fault."),
            _assistant("Noted. The motor fault takes three working days; offer the customer a loan bike."),
            _user("And the refund queue is empty."),
        ], notes=[(1, {"reviewed": True, "label": "good_answer"}, False)],
            state={"open_items": ["battery test", "battery test", "motor fault"], "shift": "late"}),
        ThreadSpec("sales", None, {"topic": "weekoverleg", "channel": "team"}, {"department": "sales"}, [
            _user("Weekoverleg: drie nieuwe leaseklanten, één bedrijf met meer dan 50 medewerkers."),
            _assistant("Dat bedrijf krijgt 12% volumekorting. Zal ik de offerte voorbereiden?"),
            _user("Ja, en noem de voorjaarsactie."),
        ], notes=[(1, {"reviewed": True, "label": "good_answer"}, False)]),
        ThreadSpec("operations", None, {"topic": "announcement", "channel": "team"}, {"department": "it"}, [
            _user("Reminder for everyone: passwords expire after 180 days."),
            _assistant("I will remind people a week before theirs expires and point them to the IT desk."),
        ]),
    ]


def thread_specs(everyone: list[Person], seed: int) -> list[ThreadSpec]:
    """One thread per customer, one per employee, and three shared team threads."""
    rng = random.Random(seed * 7919)
    found: list[ThreadSpec] = []
    for person in everyone:
        scripts = CUSTOMER_SCRIPTS if person.role == "customer" else EMPLOYEE_SCRIPTS
        key, topic, script = scripts[person.number % len(scripts)]
        order = f"B-{10000 + person.number * 37}"
        items, state = script(person, rng, order)
        labels: dict[str, str | list[str]] = {"department": person.department or key}
        metadata = {"topic": topic, "channel": CHANNELS[person.number % len(CHANNELS)],
                    "language": person.language}
        if person.role == "customer":
            metadata["order"] = order
        last_answer = max(i for i, item in enumerate(items) if isinstance(item, MessageIn) and item.role == "assistant")
        notes: list[tuple[int, dict[str, NoteValue], bool]] = [(last_answer, _rating(rng), True)]
        if person.number % 4 == 0:
            notes.append((last_answer, {"reviewed": True, "label": rng.choice(["good_answer", "needs_followup"])},
                          False))
        found.append(ThreadSpec(key, person, metadata, labels, items, notes, state))
    return found + _shared_threads()
