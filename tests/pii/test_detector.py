"""TRN-10/EXT-11: the default PII detector on realistic English and Dutch sentences, with exact spans, and
the numbers, dates and capitalised words it must leave alone."""

from __future__ import annotations

import pytest

from backend.providers.pii import DefaultDetector, Span
from backend.providers.pii.patterns import iban_checksum_ok, luhn_ok

DETECTOR = DefaultDetector()


def spans(text: str, *expected: tuple[str, str]) -> list[Span]:
    """The spans of the expected (kind, value) pairs, each looked up after the previous one."""
    out, at = [], 0
    for kind, value in expected:
        start = text.index(value, at)
        out.append(Span(start, start + len(value), kind))
        at = start + len(value)
    return out


def found(text: str) -> list[tuple[str, str]]:
    return [(s.kind, text[s.start:s.end]) for s in DETECTOR.detect(text)]


FINDS = [
    # English
    ("Hi, I'm Emma Thompson; write to emma.thompson@example.co.uk or call +44 20 7946 0958.",
     [("PERSON", "Emma Thompson"), ("EMAIL", "emma.thompson@example.co.uk"), ("PHONE", "+44 20 7946 0958")]),
    ("Please refund GB82 WEST 1234 5698 7654 32, not card 4111 1111 1111 1111, and ship to "
     "221B Baker Street, London NW1 6XE.",
     [("IBAN", "GB82 WEST 1234 5698 7654 32"), ("CARD", "4111 1111 1111 1111"),
      ("ADDRESS", "221B Baker Street, London NW1 6XE")]),
    ("The office is at 1600 Pennsylvania Avenue; call (415) 555-0132 or +1 415-555-0132 today.",
     [("ADDRESS", "1600 Pennsylvania Avenue"), ("PHONE", "(415) 555-0132"), ("PHONE", "+1 415-555-0132")]),
    ("Mr. Smith met Dr. J. Jansen and John F. Kennedy; notes at https://example.com/meet?id=7.",
     [("PERSON", "Smith"), ("PERSON", "J. Jansen"), ("PERSON", "John F. Kennedy"),
      ("URL", "https://example.com/meet?id=7")]),
    ("Amex 3782 822463 10005 belongs to Noah Smith-Jones (see www.example.org/profile).",
     [("CARD", "3782 822463 10005"), ("PERSON", "Noah Smith-Jones"), ("URL", "www.example.org/profile")]),
    ("Forward it to Olivia O'Brien at <olivia@example.com>, cc J.Doe+work@mail.example.net.",
     [("PERSON", "Olivia O'Brien"), ("EMAIL", "olivia@example.com"), ("EMAIL", "J.Doe+work@mail.example.net")]),
    # Dutch
    ("Hoi, ik ben Sanne van den Berg. Mijn nummer is 06-12345678 en mijn mail sanne@voorbeeld.nl.",
     [("PERSON", "Sanne van den Berg"), ("PHONE", "06-12345678"), ("EMAIL", "sanne@voorbeeld.nl")]),
    ("Stuur de factuur naar Prinsengracht 263-1, 1016 GV Amsterdam en maak het over naar NL91 ABNA 0417 1643 00.",
     [("ADDRESS", "Prinsengracht 263-1, 1016 GV Amsterdam"), ("IBAN", "NL91 ABNA 0417 1643 00")]),
    ("Kees van 't Hof woont aan de Laan van Meerdervoort 5; bel 070 123 4567 of +31 (0)6 1234 5678.",
     [("PERSON", "Kees van 't Hof"), ("ADDRESS", "Laan van Meerdervoort 5"), ("PHONE", "070 123 4567"),
      ("PHONE", "+31 (0)6 1234 5678")]),
    ("Gisteren sprak mevrouw De Vries met Jan Willem de Boer over de Kerkstraat 12a.",
     [("PERSON", "De Vries"), ("PERSON", "Jan Willem de Boer"), ("ADDRESS", "Kerkstraat 12a")]),
    ("Lotte de Jong-van Dijk en J.P. de Vries wonen op Oudegracht 12bis, 3511 AB Utrecht.",
     [("PERSON", "Lotte de Jong-van Dijk"), ("PERSON", "J.P. de Vries"),
      ("ADDRESS", "Oudegracht 12bis, 3511 AB Utrecht")]),
    ("Het pakket gaat naar Burgemeester de Monchyplein 5 of Van Baerlestraat 12-hs; bel 0612345678.",
     [("ADDRESS", "Burgemeester de Monchyplein 5"), ("ADDRESS", "Van Baerlestraat 12-hs"),
      ("PHONE", "0612345678")]),
    ("Rekening DE89 3704 0044 0532 0130 00 van Pieter Jansen's moeder, postcode 2511 AB Den Haag.",
     [("IBAN", "DE89 3704 0044 0532 0130 00"), ("PERSON", "Pieter Jansen"), ("ADDRESS", "2511 AB Den Haag")]),
]


@pytest.mark.parametrize(("text", "expected"), FINDS, ids=[t[:40] for t, _ in FINDS])
def test_trn_10_detector_finds_exact_spans(text: str, expected: list[tuple[str, str]]) -> None:
    assert list(DETECTOR.detect(text)) == spans(text, *expected)


NOTHING = [
    # dates and times
    "Op 15-03-2024 om 12:30, on 2024-03-15 and 03/15/2024, and 06-05-2024 12:00 we met; 1 januari 2024 too.",
    # amounts and quantities
    "The total was €1.234.567,89 ($1,234,567.89) for 12 345 678 units; +5% growth, -3.5% margin, +1 234 units.",
    # order, invoice and ticket numbers
    "Order 0612345678 and factuurnr. 0201234567 shipped; tracking number 0612345678; ticket 415-555-0132; "
    "order #123456789; klantnummer: 0201234567.",
    # years, also before capitalised words
    "In 1998, 2001 and 2024 sales grew; in 2023 AI changed things; in 2024 EU rules and in 2024 Main Street opened.",
    # numbers that fail the card and account checksums
    "1234 5678 9012 3456 and 4111 1111 1111 1112 and 0000 0000 0000 0000 fail; so do NL91ABNA0417164301 and "
    "XX12 3456 7890 1234.",
    # versions, addresses of machines, book numbers
    "Version 2.0.1, IP 192.168.1.1, ISBN 978-3-16-148410-0, build 20240315.",
    # capitalised sentence starts and Title Case
    "Will you mark the date? Mark my words. Hope this helps. Frank discussions help. May I ask?",
    "The Grace Period Policy applies. Thomas Cook Airlines flies. We met at Victoria Station by the Jordan River.",
    "Roos Bakker kwam niet. Wil Jansen dat? Ben Je er morgen?",
    # first names alone, lowercase names, places
    "Thanks Anna, see you Monday. emma thompson wrote. Meet me in Amsterdam or London on Tuesday.",
    "Het bedrag is 1234 EU. Wij wonen in de Kerkstraat. Mijn Supermarkt 24 uur. Notepad 2 is gratis.",
    # e-mail-like and URL-like text that is neither
    "foo@bar, @handle, user@localhost, a@b.c and the file report.pdf or https:// alone.",
]


@pytest.mark.parametrize("text", NOTHING, ids=[t[:40] for t in NOTHING])
def test_trn_10_detector_leaves_dates_amounts_order_numbers_years_and_sentence_starts_alone(text: str) -> None:
    assert found(text) == []


def test_trn_10_ambiguous_first_names_count_inside_a_sentence_not_at_its_start() -> None:
    text = "Roos Bakker belde. Daarna belde ik met Roos Bakker en Mark van Dam. Mark Rutte kwam ook."
    assert found(text) == [("PERSON", "Roos Bakker"), ("PERSON", "Mark van Dam")]


def test_trn_10_checksums_are_the_standard_ones() -> None:
    assert iban_checksum_ok("NL91ABNA0417164300") and not iban_checksum_ok("NL91ABNA0417164301")
    assert iban_checksum_ok("GB82WEST12345698765432") and iban_checksum_ok("BE68539007547034")
    assert luhn_ok("4111111111111111") and luhn_ok("378282246310005") and not luhn_ok("4111111111111112")


def test_trn_10_an_iban_in_lowercase_or_without_spaces_is_found_and_its_length_is_the_countrys() -> None:
    text = "iban nl91abna0417164300, of NL91ABNA0417164300 00 en BE68 5390 0754 7034."
    assert found(text) == [("IBAN", "nl91abna0417164300"), ("IBAN", "NL91ABNA0417164300"),
                           ("IBAN", "BE68 5390 0754 7034")]


def test_trn_10_overlaps_go_to_the_longer_finding() -> None:
    text = "Mail anna.de.vries@example.com or visit https://example.com/team/anna@home."
    assert found(text) == [("EMAIL", "anna.de.vries@example.com"), ("URL", "https://example.com/team/anna@home")]
