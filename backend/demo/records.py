"""The demo's memory records: each person's facts, preferences, commitments and behaviour rules, and the shared
records of each department, in Dutch and English.

Everything here is a pure function of the seed and the anchor day: the same inputs give the same records.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from backend.demo.people import Person

BIKES = ["Stadsfiets 7", "Cargo Duo", "E-Trekking 500", "Vouwfiets Mini", "Speed Pedelec S45", "Kinderfiets 20"]
PARTS = ["battery", "rear hub motor", "front carrier", "brake pads", "display unit", "chain guard"]
ONDERDELEN = ["accu", "naafmotor", "voordrager", "remblokken", "display", "kettingkast"]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]
WEEKDAGEN = ["maandag", "dinsdag", "woensdag", "donderdag", "vrijdag"]
SHOPS = {"Utrecht": "Oudegracht", "Amsterdam": "Westerpark", "Rotterdam": "Kralingen"}


@dataclass(frozen=True)
class RecordSpec:
    """One record as the demo writes it; `store` names the demo store, days count from the anchor day."""

    store: str  # "support", "people" or "sales"
    type: str
    text: str
    key: str | None = None
    tags: tuple[str, ...] = ()
    priority: str = "normal"
    confidence: float | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    expires_in_days: int | None = None
    due_in_days: int | None = None  # commitments: due at 09:00 on that day (the organisation's time zone)
    promised_to: str | None = None
    status: str = "open"


def _customer(p: Person, rng: random.Random) -> list[RecordSpec]:
    bike = rng.choice(BIKES)
    year = rng.choice([2022, 2023, 2024, 2025])
    n = rng.randrange(len(PARTS))
    day = rng.randrange(5)
    shop = SHOPS.get(p.city, p.city + " centrum")
    order = f"B-{10000 + p.number * 37}"
    meta = {"customer": f"C-{4000 + p.number}", "order": order}
    due, later = rng.randint(1, 6), rng.randint(7, 20)
    if p.language == "nl":
        specs = [
            RecordSpec("support", "fact", f"Rijdt op een {bike}, gekocht in {year}.", key="bike",
                       tags=("fiets",), metadata=meta),
            RecordSpec("support", "fact", f"Woont in {p.city}; het dichtstbijzijnde servicepunt is {shop}.",
                       tags=("adres",), confidence=0.9),
            RecordSpec("support", "preference", rng.choice([
                "Wil liever gemaild worden dan gebeld.", "Wordt het liefst via WhatsApp op de hoogte gehouden.",
                "Belt liever zelf; stuur alleen een sms als er iets klaar is."]), key="contact_channel",
                tags=("contact",), priority="high"),
            RecordSpec("support", "preference", f"Maakt het liefst een afspraak op {WEEKDAGEN[day]}ochtend.",
                       tags=("afspraak",)),
            RecordSpec("support", "commitment", f"Terugbellen over de vertraagde levering van de {ONDERDELEN[n]}.",
                       tags=("levering",), due_in_days=due, promised_to=p.id, metadata={"order": order},
                       priority="high"),
            RecordSpec("support", "behaviour", rng.choice([
                "Antwoord in het Nederlands en spreek deze klant aan met je en jij.",
                "Houd antwoorden kort: ze worden op een telefoon gelezen.",
                "Leg technische stappen uit zonder vakjargon."]), tags=("toon",)),
        ]
        if rng.random() < 0.5:
            specs.append(RecordSpec("sales", "fact", "Heeft interesse in een leasefiets via de werkgever.",
                                    tags=("lease",), confidence=0.7))
        if rng.random() < 0.4:
            specs.append(RecordSpec("sales", "commitment", "Offerte sturen voor een tweede accu met montage.",
                                    tags=("offerte",), due_in_days=later, promised_to=p.id))
        if rng.random() < 0.25:
            specs.append(RecordSpec("support", "fact", "Is op vakantie; plan geen ophaalmoment voor de terugkeer.",
                                    tags=("vakantie",), expires_in_days=rng.randint(2, 9)))
    else:
        specs = [
            RecordSpec("support", "fact", f"Rides a {bike} bought in {year}.", key="bike", tags=("bike",),
                       metadata=meta),
            RecordSpec("support", "fact", f"Lives in {p.city}; the nearest service point is {shop}.",
                       tags=("address",), confidence=0.9),
            RecordSpec("support", "preference", rng.choice([
                "Prefers e-mail over phone calls.", "Wants updates by text message, not e-mail.",
                "Likes a phone call once the repair is done."]), key="contact_channel", tags=("contact",),
                priority="high"),
            RecordSpec("support", "preference", f"Prefers appointments on {WEEKDAYS[day]} mornings.",
                       tags=("appointment",)),
            RecordSpec("support", "commitment", f"Call back about the delayed {PARTS[n]} delivery.",
                       tags=("delivery",), due_in_days=due, promised_to=p.id, metadata={"order": order},
                       priority="high"),
            RecordSpec("support", "behaviour", rng.choice([
                "Answer in English; this customer does not read Dutch.",
                "Keep answers short; they are read on a phone.",
                "Explain repair steps plainly, without jargon."]), tags=("tone",)),
        ]
        if rng.random() < 0.5:
            specs.append(RecordSpec("sales", "fact", f"Asked about the employer lease plan for a new {bike}.",
                                    tags=("lease",), confidence=0.7))
        if rng.random() < 0.4:
            specs.append(RecordSpec("sales", "commitment", "Send a quote for a second battery including fitting.",
                                    tags=("quote",), due_in_days=later, promised_to=p.id))
        if rng.random() < 0.25:
            specs.append(RecordSpec("support", "fact", "Is away on holiday; do not schedule a pick-up before return.",
                                    tags=("holiday",), expires_in_days=rng.randint(2, 9)))
    if rng.random() < 0.3:  # a promise kept: shows a finished commitment beside the open ones
        specs.append(RecordSpec("support", "commitment", specs[4].text, tags=specs[4].tags, due_in_days=-3,
                                promised_to=p.id, status="done", priority="low"))
    return specs


def _employee(p: Person, rng: random.Random) -> list[RecordSpec]:
    days = rng.choice([3, 4, 5])
    left = rng.randint(4, 22)
    month = rng.choice(["January", "February", "March", "October", "November"])
    maand = {"January": "januari", "February": "februari", "March": "maart", "October": "oktober",
             "November": "november"}[month]
    labels = {"department": p.department or ""}
    if p.language == "nl":
        return [
            RecordSpec("people", "fact", f"Werkt {days} dagen per week in het {p.department}-team in {p.city}.",
                       tags=("rooster",), labels=labels),
            RecordSpec("people", "fact", f"Heeft dit jaar nog {left} vakantiedagen over.", key="holiday_balance",
                       tags=("vakantie",), confidence=0.95),
            RecordSpec("people", "preference", rng.choice([
                "Ontvangt loonstroken liefst per e-mail.", "Wil vergaderingen liever niet voor tien uur.",
                "Werkt op vrijdag het liefst thuis."]), tags=("voorkeur",)),
            RecordSpec("people", "commitment", f"Reiskostendeclaratie van {maand} indienen.", tags=("declaratie",),
                       due_in_days=rng.randint(-2, 10), promised_to="payroll"),
            RecordSpec("people", "behaviour",
                       f"Spreek {p.first} aan met de voornaam; een formele aanhef voelt afstandelijk.", tags=("toon",)),
            RecordSpec("people", "fact", rng.choice([
                "Is bedrijfshulpverlener op de eerste verdieping.", "Volgt dit jaar de cursus klantgesprekken.",
                "Heeft een leasefiets via de fietsregeling."]), tags=("team",), priority="low"),
        ]
    return [
        RecordSpec("people", "fact", f"Works {days} days a week in the {p.department} team in {p.city}.",
                   tags=("schedule",), labels=labels),
        RecordSpec("people", "fact", f"Has {left} days of holiday left this year.", key="holiday_balance",
                   tags=("holiday",), confidence=0.95),
        RecordSpec("people", "preference", rng.choice([
            "Wants payslips in English.", "Prefers no meetings before ten.", "Likes to work from home on Fridays."]),
            tags=("preference",)),
        RecordSpec("people", "commitment", f"Submit the travel expense claim for {month}.", tags=("expenses",),
                   due_in_days=rng.randint(-2, 10), promised_to="payroll"),
        RecordSpec("people", "behaviour", f"Call {p.first} by first name; formal greetings feel distant.",
                   tags=("tone",)),
        RecordSpec("people", "fact", rng.choice([
            "Is a first-aid officer on the first floor.", "Takes the customer conversations course this year.",
            "Rides a lease bike through the bike scheme."]), tags=("team",), priority="low"),
    ]


def personal_records(person: Person, seed: int) -> list[RecordSpec]:
    """A person's own records; her number and the seed choose among the variants."""
    rng = random.Random(seed * 1000 + person.number)
    return _customer(person, rng) if person.role == "customer" else _employee(person, rng)


def _shared(store: str, type_: str, text: str, tags: tuple[str, ...], **labels: str) -> RecordSpec:
    return RecordSpec(store, type_, text, tags=tags, labels=dict(labels), priority="high" if type_ == "behaviour"
                      else "normal")


def shared_records() -> list[RecordSpec]:
    """What the organisation knows for everyone in a department (or everyone), in both languages."""
    support, people, sales = "support", "people", "sales"
    found = [
        _shared(support, "fact", "Refunds are paid within five working days after the return arrives.",
                ("refund",), department="support"),
        _shared(support, "fact", "Terugbetalingen staan binnen vijf werkdagen na ontvangst van de retour op de "
                "rekening.", ("terugbetaling",), department="support"),
        _shared(support, "fact", "Batteries carry a two-year warranty or 800 charge cycles, whichever comes first.",
                ("warranty", "battery"), department="support"),
        _shared(support, "fact", "Op accu's zit twee jaar garantie of 800 laadcycli, wat het eerst komt.",
                ("garantie", "accu"), department="support"),
        _shared(support, "fact", "A standard service takes one working day; e-bikes with a motor fault take three.",
                ("service",), department="support"),
        _shared(support, "fact", "Een onderhoudsbeurt duurt één werkdag; bij een motorstoring drie werkdagen.",
                ("onderhoud",), department="support"),
        _shared(support, "behaviour", "Never share another customer's order, address or repair details.",
                ("privacy",), audience="everyone"),
        _shared(support, "behaviour", "Deel nooit bestel-, adres- of reparatiegegevens van een andere klant.",
                ("privacy",), audience="everyone"),
        _shared(support, "behaviour", "Offer a loan bike when a repair takes longer than two days.",
                ("service",), department="support"),
        _shared(support, "fact", "Pick-up and delivery is free within 15 km of a service point.", ("delivery",),
                department="support"),
        _shared(support, "fact", "Ophalen en terugbrengen is gratis binnen 15 km van een servicepunt.",
                ("levering",), department="support"),
        _shared(support, "fact", "Service points open at 08:30 and close at 17:30; Saturdays until 16:00.",
                ("opening hours",), audience="everyone"),
        _shared(people, "fact", "Salaries are paid on the 25th; when that is a weekend day, on the Friday before.",
                ("salary",), department="payroll"),
        _shared(people, "fact", "Salarissen worden op de 25e betaald; valt die in het weekend, dan op de vrijdag "
                "ervoor.", ("salaris",), department="payroll"),
        _shared(people, "fact", "Travel expense claims are due by the fifth working day of the next month.",
                ("expenses",), department="payroll"),
        _shared(people, "fact", "Declaraties moeten uiterlijk de vijfde werkdag van de volgende maand binnen zijn.",
                ("declaratie",), department="payroll"),
        _shared(people, "fact", "Holiday requests of more than two weeks need approval a month in advance.",
                ("holiday",), audience="everyone"),
        _shared(people, "fact", "Vakantie van meer dan twee weken vraag je een maand van tevoren aan.",
                ("vakantie",), audience="everyone"),
        _shared(people, "fact", "The office is closed on King's Day, 27 April.", ("office",), audience="everyone"),
        _shared(people, "fact", "Op Koningsdag, 27 april, is het kantoor gesloten.", ("kantoor",),
                audience="everyone"),
        _shared(people, "behaviour", "Never state another employee's salary or leave balance.", ("privacy",),
                department="payroll"),
        _shared(people, "fact", "Laptops are replaced every four years; request one through the IT desk.",
                ("laptop",), department="it"),
        _shared(people, "fact", "Wachtwoorden verlopen na 180 dagen; de IT-desk helpt bij het resetten.",
                ("wachtwoord",), department="it"),
        _shared(people, "fact", "The bike scheme lets employees lease a bike for up to 3,000 euros.",
                ("bike scheme",), audience="everyone"),
        _shared(sales, "fact", "Employer lease contracts run for 36 months and include insurance and service.",
                ("lease",), department="sales"),
        _shared(sales, "fact", "Een leasecontract via de werkgever loopt 36 maanden, inclusief verzekering en "
                "onderhoud.", ("lease",), department="sales"),
        _shared(sales, "fact", "Companies with more than 50 employees get a 12% volume discount.", ("discount",),
                department="sales"),
        _shared(sales, "behaviour", "Do not promise delivery dates for the Cargo Duo before stock is confirmed.",
                ("cargo",), department="sales"),
        _shared(sales, "fact", "Trade-in: a working e-bike younger than five years is worth at least 250 euros.",
                ("trade-in",), department="sales"),
        _shared(sales, "fact", "Inruil: een werkende e-bike jonger dan vijf jaar levert minstens 250 euro op.",
                ("inruil",), department="sales"),
    ]
    seasonal = [
        RecordSpec(sales, "fact", "Spring offer: 10% off the first lease year for contracts signed this month.",
                   tags=("offer",), labels={"department": "sales"}, expires_in_days=12, priority="high"),
        RecordSpec(sales, "fact", "Voorjaarsactie: 10% korting op het eerste leasejaar bij ondertekening deze maand.",
                   tags=("actie",), labels={"department": "sales"}, expires_in_days=12, priority="high"),
        RecordSpec(support, "fact", "Spare batteries for the Cargo Duo are back in stock from next week.",
                   tags=("battery", "stock"), labels={"department": "support"}, expires_in_days=5),
    ]
    return found + seasonal
