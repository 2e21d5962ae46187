"""The demo's people: customers of a bicycle company and its employees, Dutch and English speakers.

Fixed lists, no randomness: the same fifty people in the same order on every run.
"""

from __future__ import annotations

from dataclasses import dataclass

# (first name, last name, city) for customers; the surname particles stay lowercase as in Dutch.
DUTCH_CUSTOMERS = [
    ("Sanne", "de Vries", "Utrecht"), ("Daan", "Jansen", "Amersfoort"), ("Fleur", "van Dijk", "Haarlem"),
    ("Bram", "Bakker", "Zwolle"), ("Lotte", "Visser", "Groningen"), ("Jesse", "Smit", "Leiden"),
    ("Noor", "Meijer", "Delft"), ("Thijs", "de Boer", "Arnhem"), ("Eva", "Mulder", "Nijmegen"),
    ("Ruben", "de Groot", "Eindhoven"), ("Iris", "Bos", "Tilburg"), ("Lars", "Vos", "Breda"),
    ("Femke", "Peters", "Maastricht"), ("Joris", "Hendriks", "Deventer"), ("Anouk", "van Leeuwen", "Alkmaar"),
    ("Wouter", "Dekker", "Den Bosch"),
]
ENGLISH_CUSTOMERS = [
    ("Emma", "Thompson", "Amsterdam"), ("Oliver", "Hughes", "Rotterdam"), ("Grace", "Patel", "The Hague"),
    ("Jack", "Morrison", "Utrecht"), ("Chloe", "Bennett", "Leiden"), ("Harry", "Walsh", "Haarlem"),
    ("Amelia", "Clarke", "Amsterdam"), ("Noah", "Fischer", "Eindhoven"), ("Isla", "Campbell", "Delft"),
    ("Leo", "Murphy", "Rotterdam"), ("Mia", "Kowalski", "Groningen"), ("Ethan", "Brooks", "Amsterdam"),
    ("Ava", "Sullivan", "Nijmegen"), ("Lucas", "Novak", "The Hague"), ("Zoe", "Harper", "Utrecht"),
    ("Samuel", "Reid", "Amersfoort"),
]
# (first name, last name, department, language) for employees.
EMPLOYEES = [
    ("Anna", "Kramer", "support", "nl"), ("Bert", "van den Berg", "support", "nl"),
    ("Charlotte", "Evans", "support", "en"), ("Dirk", "Willems", "support", "nl"),
    ("Hannah", "Scott", "support", "en"), ("Kees", "Brouwer", "support", "nl"),
    ("Marieke", "Postma", "payroll", "nl"), ("Peter", "Gallagher", "payroll", "en"),
    ("Yvonne", "de Wit", "payroll", "nl"), ("Sophie", "Laurent", "payroll", "en"),
    ("Tom", "Verbeek", "sales", "nl"), ("Rachel", "Adams", "sales", "en"),
    ("Maarten", "Koster", "sales", "nl"), ("Olivia", "Grant", "sales", "en"),
    ("Niels", "Prins", "sales", "nl"), ("Ilse", "Hoekstra", "it", "nl"),
    ("Daniel", "Ward", "it", "en"), ("Roos", "Jacobs", "it", "nl"),
]
OFFICES = ["Utrecht", "Rotterdam", "Amsterdam"]


@dataclass(frozen=True)
class Person:
    id: str  # what the API calls the subject: lowercase first.last
    name: str
    language: str  # "nl" or "en": the language of her records and conversations
    role: str  # "customer" or "employee"
    city: str
    department: str | None = None  # employees only; also her subject attribute `department`
    number: int = 0  # her place in the list, which seeds her own records

    @property
    def first(self) -> str:
        return self.name.split(" ")[0]

    @property
    def attributes(self) -> dict[str, list[str]]:
        return {"department": [self.department]} if self.department else {}


def _id(first: str, last: str) -> str:
    return f"{first}.{last}".lower().replace(" ", ".")


def people() -> list[Person]:
    """Fifty people: 32 customers (half Dutch, half English) and 18 employees in four departments."""
    found: list[Person] = []
    for language, rows in (("nl", DUTCH_CUSTOMERS), ("en", ENGLISH_CUSTOMERS)):
        for first, last, city in rows:
            found.append(Person(_id(first, last), f"{first} {last}", language, "customer", city,
                                number=len(found)))
    for n, (first, last, department, language) in enumerate(EMPLOYEES):
        found.append(Person(_id(first, last), f"{first} {last}", language, "employee", OFFICES[n % len(OFFICES)],
                            department=department, number=len(found)))
    return found
