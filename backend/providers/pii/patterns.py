"""Pattern detectors of the default PII detector (TRN-10): e-mail addresses, URLs, IBANs (mod-97), payment
cards (Luhn), phone numbers and street addresses. Each one is written for precision: a number is only taken
for a phone, card or account when its shape and checksum say so, and dates, amounts, years and order numbers
are left alone (tests/pii pins both sides)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from backend.providers.pii.names import FIRST_NAMES
from backend.providers.pii.spans import Span

EMAIL = re.compile(
    r"(?<![\w.%+-])[A-Za-z0-9_%+-](?:[A-Za-z0-9._%+-]{0,62}[A-Za-z0-9_%+-])?"
    r"@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,24}(?![\w-])")

URL = re.compile(r"(?<![\w@/.-])(?:(?:https?|ftp)://|www\.)[^\s<>\"'`{}|\\^\[\]]+", re.IGNORECASE)
_URL_TRAILING = ".,;:!?'\")"


def find_emails(text: str) -> Iterator[Span]:
    for m in EMAIL.finditer(text):
        yield Span(m.start(), m.end(), "EMAIL")


def find_urls(text: str) -> Iterator[Span]:
    for m in URL.finditer(text):
        url = m.group(0)
        # Sentence punctuation after a link is not part of it; a closing parenthesis is when the link opened one.
        while url and url[-1] in _URL_TRAILING:
            if url[-1] == ")" and url.count("(") >= url.count(")"):
                break
            url = url[:-1]
        host = re.sub(r"^(?:(?:https?|ftp)://)", "", url, flags=re.IGNORECASE)
        if "." in host.strip(".") and len(host) > 4:
            yield Span(m.start(), m.start() + len(url), "URL")


# ---------------------------------------------------------------- IBAN

# Lengths of the IBAN registry (ISO 13616); a country not listed is not guessed.
IBAN_LENGTHS = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22, "BR": 29, "BY": 28,
    "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "DO": 28, "EE": 20, "EG": 29, "ES": 24, "FI": 18,
    "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28, "HR": 21, "HU": 28, "IE": 22,
    "IL": 23, "IQ": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32, "LI": 21, "LT": 20,
    "LU": 20, "LV": 21, "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MR": 27, "MT": 31, "MU": 30, "NL": 18, "NO": 15,
    "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "SA": 24, "SC": 31, "SE": 24, "SI": 19,
    "SK": 24, "SM": 27, "ST": 25, "SV": 28, "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20,
}
_IBAN_START = re.compile(r"(?<![A-Za-z0-9])[A-Za-z]{2}\d{2}")


def iban_checksum_ok(compact: str) -> bool:
    """ISO 7064 mod 97-10: the first four characters moved to the end, letters as 10..35, remainder 1."""
    rearranged = compact[4:] + compact[:4]
    if not rearranged.isascii() or not rearranged.isalnum():
        return False
    return int("".join(str(int(c, 36)) for c in rearranged)) % 97 == 1


def find_ibans(text: str) -> Iterator[Span]:
    for m in _IBAN_START.finditer(text):
        length = IBAN_LENGTHS.get(m.group(0)[:2].upper())
        if length is None:
            continue
        chars, i = [m.group(0)], m.end()
        count = 4
        # Read exactly the country's length of letters and digits, allowing one space between groups.
        while count < length and i < len(text):
            c = text[i]
            if c.isascii() and c.isalnum():
                chars.append(c)
                count += 1
                i += 1
            elif c == " " and i + 1 < len(text) and text[i + 1].isascii() and text[i + 1].isalnum():
                i += 1
            else:
                break
        if count == length and (i == len(text) or not text[i].isalnum()) and iban_checksum_ok("".join(chars).upper()):
            yield Span(m.start(), i, "IBAN")


# ---------------------------------------------------------------- payment cards

_CARD = re.compile(r"(?<![\w.,-])\d(?:[ -]?\d){12,18}(?![\w]|[.,-]\d)")


def luhn_ok(digits: str) -> bool:
    total = 0
    for i, c in enumerate(reversed(digits)):
        d = int(c)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _card_grouping_ok(candidate: str) -> bool:
    separators = set(re.findall(r"[ -]", candidate))
    if not separators:
        return True
    if len(separators) > 1:
        return False
    groups = [len(g) for g in re.split(r"[ -]", candidate)]
    if groups in ([4, 6, 5], [4, 6, 4]):  # American Express, Diners Club
        return True
    return len(groups) >= 3 and all(g == 4 for g in groups[:-1]) and 1 <= groups[-1] <= 4


def find_cards(text: str) -> Iterator[Span]:
    for m in _CARD.finditer(text):
        candidate = m.group(0)
        digits = re.sub(r"\D", "", candidate)
        # Issuer ranges start with 2-6 (Mastercard 2-series, Amex/Diners/JCB 3, Visa 4, Mastercard 5, Discover 6).
        if (13 <= len(digits) <= 19 and digits[0] in "23456" and len(set(digits)) > 1
                and _card_grouping_ok(candidate) and luhn_ok(digits)):
            yield Span(m.start(), m.end(), "CARD")


# ---------------------------------------------------------------- phone numbers

_INTERNATIONAL = re.compile(
    r"(?<![\w+])(?:\+|00)[1-9]\d{0,2}(?:[ .-]?\(0\))?(?:(?:[ .-]|\s-\s)?\(?\d{1,5}\)?){1,6}(?![\w])")
_NATIONAL = re.compile(
    r"(?<![\w+/.,-])(?:\(0\d{1,4}\)|0[1-9]\d{0,3})(?:(?:\s?-\s?|[ .])?\d{1,8}){1,5}(?![\w]|[.,/-]\d)")
_US = re.compile(
    r"(?<![\w+/.,-])(?:\([2-9]\d{2}\)\s?|[2-9]\d{2}[-.])[2-9]\d{2}[-.]\d{4}(?![\w]|[.,/-]\d)")
_DATE_SHAPED = re.compile(r"\d{1,2}([-./])\d{1,2}\1\d{2,4}")
# A number right after such words is a reference, not a phone number ("order 0612345678", "factuurnr. 0201234567").
_REFERENCE_BEFORE = re.compile(
    r"(?:order|invoice|ref|reference|ticket|case|tracking|customer|account|acct|klant|factuur|bestelling|bestel|"
    r"zending|dossier|referentie|kenmerk|polis|policy|contract|kvk|btw|vat|bsn|rekening)"
    r"(?:nummer|nr|number|no|id)?\.?\s*(?:(?:number|nummer|nr|no|id)\.?\s*)?[:#]?\s*$", re.IGNORECASE)


def _is_reference(text: str, start: int) -> bool:
    line_start = max(text.rfind("\n", 0, start) + 1, start - 40)
    return _REFERENCE_BEFORE.search(text[line_start:start]) is not None


def _international(text: str) -> Iterator[Span]:
    for m in _INTERNATIONAL.finditer(text):
        candidate = m.group(0)
        groups = list(re.finditer(r"\d+", candidate.replace("(0)", "   ")))
        # A long run may have swallowed a number after the phone number: give back trailing groups.
        while groups and sum(len(g.group(0)) for g in groups) > 15:
            groups.pop()
        digits = sum(len(g.group(0)) for g in groups)
        if len(groups) >= 2 and digits >= 9:
            end = m.start() + groups[-1].end()
            if candidate[groups[-1].end():groups[-1].end() + 1] == ")":
                end += 1
            yield Span(m.start(), end, "PHONE")


def _national(text: str) -> Iterator[Span]:
    for m in _NATIONAL.finditer(text):
        candidate = m.group(0)
        groups = re.findall(r"\d+", candidate)
        digits = "".join(groups)
        if len(digits) not in (10, 11) or _DATE_SHAPED.match(candidate) or _is_reference(text, m.start()):
            continue
        # Dutch numbers have ten digits; eleven are British (01/02/03 landlines, 07 mobiles, 08 non-geographic).
        if len(digits) == 11 and digits[1] not in "12378":
            continue
        # A two-digit first group is only a Dutch mobile prefix (06); "01-02 …" is something else.
        if len(groups[0]) == 2 and not candidate.startswith("(") and groups[0] != "06":
            continue
        if "." in candidate and len(set(re.findall(r"[ .-]", candidate))) > 1:
            continue
        yield Span(m.start(), m.end(), "PHONE")


def _us(text: str) -> Iterator[Span]:
    for m in _US.finditer(text):
        if not _is_reference(text, m.start()):
            yield Span(m.start(), m.end(), "PHONE")


def find_phones(text: str) -> Iterator[Span]:
    yield from _international(text)
    yield from _national(text)
    yield from _us(text)


# ---------------------------------------------------------------- street addresses

_LOWER = "a-zà-öø-ÿ"
_CAP = rf"[A-Z][{_LOWER}'’]+"
_UK_POSTCODE = r"[A-Z]{1,2}\d[A-Z\d]?\s\d[A-Z]{2}"
# Dutch postcodes: four digits (no leading zero) and two letters, never SA, SD or SS.
_NL_POSTCODE = r"[1-9]\d{3}\s?(?!SA|SD|SS)[A-Z]{2}(?![\w])"
_CITY = rf"(?:(?:Den|De)\s|'s-)?{_CAP}"
_EN_TYPES = (r"(?:Street|St|Road|Rd|Avenue|Ave|Lane|Ln|Drive|Boulevard|Blvd|Way|Court|Ct|Place|Square|Terrace|"
             r"Close|Crescent|Gardens|Grove|Mews|Parkway|Highway)")
_EN_ADDRESS = re.compile(
    rf"(?<![\w.,-])\d{{1,5}}[A-Za-z]?(?:-\d{{1,5}})?,?\s+(?:{_CAP}\s+){{1,3}}{_EN_TYPES}(?![\w])"
    rf"(?:,?\s+(?:{_CAP}\s+){{0,2}}(?:{_UK_POSTCODE}|\d{{5}}(?:-\d{{4}})?)(?![\w]))?")
_NL_SUFFIXES = ("straat|laan|weg|plein|gracht|kade|singel|dijk|dreef|hof|steeg|plantsoen|burgwal|baan|park|"
                "vaart|boulevard|allee|straatweg|steenweg")
_NL_WORDS = "Straat|Laan|Weg|Plein|Gracht|Kade|Singel|Dijk|Markt|Steeg|Dreef|Hof"
_NL_ADJECTIVES = ("Grote|Kleine|Oude|Nieuwe|Korte|Lange|Hoge|Lage|Eerste|Tweede|Derde|Noord|Zuid|Oost|West|"
                  "Achter|Voor|Binnen|Buiten")
_NL_PARTICLE = r"(?:van|de|der|den|het|'t|ter|ten)\s+"
_NL_STREET = (rf"(?:(?:{_CAP}\s+(?:{_NL_PARTICLE})*){{0,3}}[A-Z][{_LOWER}'’-]*?(?:{_NL_SUFFIXES})"
              rf"|(?:{_NL_ADJECTIVES})\s+(?:{_NL_WORDS})"
              rf"|(?:Laan|Plein|Weg|Kade|Singel)\s+(?:{_NL_PARTICLE})+{_CAP})")
_NL_NUMBER = r"\d{1,5}(?:-\d{1,4}|-?(?:hs|bis|huis|III|II|IV|I)|[A-Za-z]|\s[A-Z])?(?![\w])"
_NL_ADDRESS = re.compile(
    rf"(?<![\w-]){_NL_STREET}\s+(?P<number>{_NL_NUMBER})(?:,?\s+{_NL_POSTCODE}(?:\s+{_CITY})?)?")
# A postcode on its own counts only with a place after it; a year before an abbreviation ("2024 EU Act") does not.
_NL_POSTCODE_CITY = re.compile(rf"(?<![\w.,-])([1-9]\d{{3}})\s?((?!SA|SD|SS)[A-Z]{{2}})\s+{_CITY}(?![\w])")
_NOT_POSTCODE_LETTERS = frozenset(("AI", "AM", "BV", "CV", "EU", "HR", "ID", "IT", "KG", "NL", "NV", "OK", "PC", "PM",
                                   "TV", "UK", "US", "VS"))
_YEAR_BEFORE = re.compile(r"(?:in|since|sinds|from|van|tot|until|jaar|year|of|uit|circa|ca)\.?\s*$", re.IGNORECASE)
_UK_POSTCODE_ALONE = re.compile(rf"(?<![\w-]){_UK_POSTCODE}(?![\w])")


# The words a Dutch street name may begin with before its main word ("Burgemeester de Monchyplein", "Eerste
# Constantijn Huygensstraat", "Van Baerlestraat"); other capitalised words before a street ("Gisteren",
# "Naar") start a sentence and are left out of the address.
_NL_STREET_LEADS = frozenset((
    "Burgemeester", "Prins", "Prinses", "Koning", "Koningin", "Generaal", "Dokter", "Doctor", "Sint", "Graaf",
    "Hertog", "Professor", "President", "Kapitein", "Admiraal", "Kardinaal", "Pastoor", "Baron", "Jonkheer", "Van",
    "De", "Den", "Der", "Ter", "Ten", "Het", *_NL_ADJECTIVES.split("|"), *_NL_WORDS.split("|")))


def _street_start(text: str, start: int, street_end: int) -> int:
    """Skip leading words that cannot begin a street name (sentence starts, lowercase particles)."""
    words = list(re.finditer(r"\S+", text[start:street_end]))
    for word in words[:-1]:
        if word.group(0) in _NL_STREET_LEADS or word.group(0) in FIRST_NAMES:
            return start + word.start()
    return start + words[-1].start()


def _year_before(text: str, start: int, number: str) -> bool:
    """`number` is a year told as one ("in 2024 Main Street opened", "sinds 2019 AB Utrecht")."""
    return (number.isdigit() and 1900 <= int(number) <= 2099
            and _YEAR_BEFORE.search(text[max(0, start - 12):start]) is not None)


def find_addresses(text: str) -> Iterator[Span]:
    for m in _EN_ADDRESS.finditer(text):
        number = m.group(0)[:len(m.group(0)) - len(m.group(0).lstrip("0123456789"))]
        if not _year_before(text, m.start(), number):
            yield Span(m.start(), m.end(), "ADDRESS")
    for m in _NL_ADDRESS.finditer(text):
        yield Span(_street_start(text, m.start(), m.start("number")), m.end(), "ADDRESS")
    for m in _UK_POSTCODE_ALONE.finditer(text):
        yield Span(m.start(), m.end(), "ADDRESS")
    for m in _NL_POSTCODE_CITY.finditer(text):
        if m.group(2) not in _NOT_POSTCODE_LETTERS and not _year_before(text, m.start(), m.group(1)):
            yield Span(m.start(), m.end(), "ADDRESS")
