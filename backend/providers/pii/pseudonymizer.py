"""Placeholders for personal data, stable within a thread (TRN-10, EXT-11).

A `Pseudonymizer` holds one thread's mapping (`<PERSON_1>` ↔ "Anna de Vries"). `hide` replaces what the
detector finds, every value the thread already maps, and the values the request's person gives in her
attributes; the same value always gets the same placeholder and a new one the next number of its kind.
`restore` puts the real values back into what a model wrote. The mapping is loaded from and saved to
`thread_pseudonyms` by `backend.domains.privacy`; for a turn that stores nothing it lives only here.

Identity is the exact string: "Anna" and "ANNA" are two values with two placeholders, so restoring what was
hidden gives back exactly the text that was hidden. Matching a known value is looser: a name matches as
written, capitalised or in capitals, other kinds in any case, and the spaces inside a value match any run of
whitespace.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from types import EllipsisType
from typing import Any

from backend.providers.pii import literals
from backend.providers.pii.detector import Detector
from backend.providers.pii.spans import KIND_SHAPE, PiiUnavailable, Span, resolve

PLACEHOLDER = re.compile(r"<([A-Z][A-Z0-9]{0,31})_([1-9]\d{0,8})>")

# Attribute names whose values are the person's own name, address or number (keys compared in lowercase,
# with "-" and spaces read as "_").
ATTRIBUTE_KINDS = {
    **dict.fromkeys(("name", "full_name", "fullname", "display_name", "given_name", "first_name", "firstname",
                     "family_name", "last_name", "lastname", "surname", "nickname", "preferred_name"), "PERSON"),
    **dict.fromkeys(("email", "e_mail", "mail", "email_address"), "EMAIL"),
    **dict.fromkeys(("phone", "phone_number", "mobile", "telephone", "tel"), "PHONE"),
}


def placeholder(kind: str, number: int) -> str:
    return f"<{kind}_{number}>"


@dataclass(frozen=True, slots=True)
class Pseudonym:
    """One row of a thread's mapping. `subject` is the person whose text the value was first found in (None:
    a text of nobody in particular, or a model's); `belongs_to` the person whose subject attributes give this
    value (her name, e-mail address, phone number), when known. Erasing a person uses both (MEM-19)."""

    placeholder: str
    kind: str
    value: str
    subject: str | None = None
    belongs_to: str | None = None

    @property
    def number(self) -> int:
        m = PLACEHOLDER.fullmatch(self.placeholder)
        return int(m.group(2)) if m else 0


@dataclass(frozen=True, slots=True)
class KnownValue:
    """A value to hide wherever it appears, such as the person's name from her subject attributes."""

    kind: str
    value: str
    subject: str | None = None


def known_from_attributes(attributes: Mapping[str, Sequence[str]] | None, subject: str | None) -> list[KnownValue]:
    """Her name, e-mail address and phone number from her subject attributes (PLT-7). A full name also yields
    its first word and the rest ("Anna", "de Vries"), which people write on their own."""
    known: list[KnownValue] = []
    for key, values in (attributes or {}).items():
        kind = ATTRIBUTE_KINDS.get(re.sub(r"[\s-]", "_", key.strip().lower()))
        if kind is None:
            continue
        for raw in values:
            value = " ".join(raw.split()) if isinstance(raw, str) else ""
            if len(value) < 2:
                continue
            known.append(KnownValue(kind, value, subject))
            words = value.split(" ")
            if kind == "PERSON" and len(words) > 1:
                known.extend(KnownValue(kind, part, subject) for part in (words[0], " ".join(words[1:]))
                             if len(part) >= 3)
    return known


_PAIRS = {"<<": ">>", "{{": "}}", "&lt;": "&gt;", "<": ">", "[": "]", "{": "}"}


@lru_cache(maxsize=256)
def _restore_pattern(kinds: tuple[str, ...]) -> re.Pattern[str]:
    """Placeholder spellings of the given kinds (the thread's), longest kind first; closers are checked apart."""
    names = "|".join(re.escape(k) for k in sorted(kinds, key=len, reverse=True))
    # The spaces after an opening bracket belong to it: `(?P<open>…)?[ \t]*` was tried at every space of a
    # run and scanned the rest of the run each time (16 KiB of spaces: 6 s).
    return re.compile(r"(?:(?P<open><<|\{\{|&lt;|[<\[{])[ \t]*)?(?<![A-Za-z0-9_])(?P<kind>(?i:" + names + r"))"
                      r"(?P<sep>[_\- ]?)(?P<num>\d{1,9})(?![0-9A-Za-z_])")


class Pseudonymizer:
    """One thread's placeholders. Not shared between threads; not thread-safe (one per turn or job)."""

    def __init__(self, detector: Detector, entries: Iterable[Pseudonym] = (), *, known: Iterable[KnownValue] = (),
                 subject: str | None = None) -> None:
        self.detector = detector
        self.subject = subject
        self._by_placeholder: dict[str, Pseudonym] = {}
        self._by_value: dict[tuple[str, str], Pseudonym] = {}
        self._next: dict[str, int] = {}
        self._new: list[Pseudonym] = []
        self._known: dict[str, KnownValue] = {}
        # What `_known_spans` finds (None: build again from the mapping) and, by normalised value, (kind,
        # spellings); a new value is added to both, so the spellings are not all compiled again (TRN-10).
        self._matcher: literals.Values | None = None
        self._values: dict[str, tuple[str, set[str]]] = {}
        self._kinds: set[str] = set()
        self._restorer: re.Pattern[str] | None = None  # placeholders of `_kinds`, cached until a kind is added
        for entry in entries:
            self._add(entry)
        for value in known:
            self._known.setdefault(_norm(value.value), value)

    # ------------------------------------------------------------ the mapping

    @property
    def entries(self) -> list[Pseudonym]:
        return sorted(self._by_placeholder.values(), key=lambda e: (e.kind, e.number))

    def new_entries(self) -> list[Pseudonym]:
        """The values given a placeholder since the mapping was loaded or last adopted (not yet saved)."""
        return list(self._new)

    def adopt(self, saved: Iterable[Pseudonym]) -> bool:
        """Take the stored placeholders of this turn's new values (a concurrent turn of the thread may have
        given a value first, or taken a number); True when any placeholder differs, so the caller hides again
        what it had hidden before sending anything."""
        saved = list(saved)
        before = {(e.kind, e.value): e.placeholder for e in self._new}
        for entry in self._new:
            self._by_placeholder.pop(entry.placeholder, None)
            self._by_value.pop((entry.kind, entry.value), None)
        self._new = []
        changed = False
        for entry in saved:
            stale = self._by_placeholder.get(entry.placeholder)
            if stale is not None and stale.value != entry.value:
                self._by_value.pop((stale.kind, stale.value), None)
            self._add(entry)
            changed = changed or before.get((entry.kind, entry.value), entry.placeholder) != entry.placeholder
        self._matcher = None
        self._kinds, self._restorer = {e.kind for e in self._by_placeholder.values()}, None
        return changed

    def _add(self, entry: Pseudonym) -> None:
        self._by_placeholder[entry.placeholder] = entry
        self._by_value[(entry.kind, entry.value)] = entry
        self._next[entry.kind] = max(self._next.get(entry.kind, 1), entry.number + 1)
        if entry.kind not in self._kinds:
            self._kinds.add(entry.kind)
            self._restorer = None

    def _placeholder_for(self, kind: str, value: str, subject: str | None) -> str:
        entry = self._by_value.get((kind, value))
        if entry is None:
            number = self._next.get(kind, 1)
            known = self._known.get(_norm(value))
            entry = Pseudonym(placeholder(kind, number), kind, value, subject,
                              known.subject if known is not None and known.kind == kind else None)
            self._add(entry)
            self._new.append(entry)
            if self._matcher is not None:  # as a build from the whole mapping would have it: the entry is last
                self._values.setdefault(_norm(value), (kind, set()))[1].add(value)
                self._matcher.add(value)
        return entry.placeholder

    # ------------------------------------------------------------ hiding

    def hide(self, text: str, *, subject: str | EllipsisType | None = ...) -> str:
        """`text` with every piece of personal data replaced by its placeholder. `subject` names whose text
        it is (default: the pseudonymizer's person); a new value is attributed to her."""
        if not text:
            return text
        who = self.subject if isinstance(subject, EllipsisType) else subject
        detected = self._detect(text)
        spans = resolve(detected, preferred=self._known_spans(text, detected))
        out: list[str] = []
        pos = 0
        for span in spans:
            out.append(text[pos:span.start])
            out.append(self._placeholder_for(span.kind, text[span.start:span.end], who))
            pos = span.end
        out.append(text[pos:])
        return "".join(out)

    def hide_json(self, obj: Any, *, subject: str | EllipsisType | None = ...) -> Any:
        """A copy of a JSON value (tool arguments, tool output, message items) with every string hidden;
        object keys are names, not data, and stay as they are."""
        return _walk(obj, lambda s: self.hide(s, subject=subject))

    def _detect(self, text: str) -> list[Span]:
        try:
            spans = list(self.detector.detect(text))
        except PiiUnavailable:
            raise
        except Exception as exc:  # a plugged detector may fail in any way; nothing unhidden may leave
            raise PiiUnavailable(f"The PII detector failed: {exc}") from exc
        for span in spans:
            if not (isinstance(span, Span) and 0 <= span.start < span.end <= len(text)
                    and KIND_SHAPE.fullmatch(span.kind)):
                raise PiiUnavailable(f"The PII detector answered an invalid span: {span!r}")
        return spans

    def _known_spans(self, text: str, detected: Sequence[Span]) -> list[Span]:
        """Every occurrence of a value the thread maps, the person's attributes give, or the detector found
        somewhere in this text: a value found once is hidden everywhere, so hiding a text twice gives the same."""
        if self._matcher is None:
            self._values = {}
            pairs = [(k.kind, k.value) for k in self._known.values()]
            pairs += [(e.kind, e.value) for e in self._by_placeholder.values()]
            for kind, value in pairs:
                self._values.setdefault(_norm(value), (kind, set()))[1].add(value)
            self._matcher = literals.Values(s for _, found in self._values.values() for s in found)
        spans = _literal_spans(self._matcher.finditer(text), self._values)
        fresh: dict[str, tuple[str, set[str]]] = {}
        for span in detected:
            value = text[span.start:span.end]
            if _norm(value) not in self._values:
                fresh.setdefault(_norm(value), (span.kind, set()))[1].add(value)
        if fresh:
            matcher = literals.matcher(s for _, found in fresh.values() for s in found)
            spans += _literal_spans(matcher.finditer(text) if matcher is not None else (), fresh)
        return spans

    # ------------------------------------------------------------ restoring

    def restore(self, text: str) -> str:
        """`text` with the thread's placeholders replaced by their values. Accepted: `<PERSON_1>`; the bare
        `PERSON_1` (capitals and underscore); and inside `<…>`, `[…]`, `{…}`, `{{…}}`, `<<…>>` or `&lt;…&gt;`
        any case, `_`, `-`, a space or nothing between kind and number, spaces inside the brackets.
        The exact form wins over a looser reading, so brackets around it stay ("<<EMAIL_1>>" → "<a@b.nl>").
        A placeholder the thread does not hold stays as written."""
        if not text or not self._by_placeholder:
            return text
        if self._restorer is None:
            self._restorer = _restore_pattern(tuple(sorted(self._kinds)))
        out: list[str] = []
        pos = 0
        for m in self._restorer.finditer(text):
            kind_start, num_end = m.start("kind"), m.end("num")
            if kind_start < pos:
                continue
            kind, bare = m.group("kind"), m.group("kind").isupper() and m.group("sep") == "_"
            entry = self._by_placeholder.get(placeholder(kind.upper(), int(m.group("num"))))
            if entry is None:
                continue
            if bare and kind_start - 1 >= pos and text[kind_start - 1] == "<" and text[num_end:num_end + 1] == ">":
                out += [text[pos:kind_start - 1], entry.value]
                pos = num_end + 1
                continue
            opened = m.group("open") if m.start() >= pos else None
            closed = _closing(text, m.start(), num_end, opened) if opened else None
            if closed is not None:
                out += [text[pos:closed[0]], entry.value]
                pos = closed[1]
            elif bare:
                out += [text[pos:kind_start], entry.value]
                pos = num_end
        out.append(text[pos:])
        return "".join(out)

    def restore_json(self, obj: Any) -> Any:
        return _walk(obj, self.restore)


def _closing(text: str, start: int, num_end: int, opened: str) -> tuple[int, int] | None:
    """(where the opening bracket starts, where the closing one ends) when `opened` is closed after the number
    (spaces allowed); "<<x>" is read as "<" followed by "<x>"."""
    after = num_end
    while after < len(text) and text[after] in " \t":
        after += 1
    for opener in (opened, opened[1:]) if opened in ("<<", "{{") else (opened,):
        closer = _PAIRS[opener]
        if text.startswith(closer, after):
            return start + len(opened) - len(opener), after + len(closer)
    return None


def _norm(value: str) -> str:
    return " ".join(value.split()).casefold()


def _literal_spans(found: Iterable[re.Match[str]], values: Mapping[str, tuple[str, set[str]]]) -> list[Span]:
    spans: list[Span] = []
    for m in found:
        known = values.get(_norm(m.group(0)))
        if known is None or (known[0] == "PERSON" and not _same_name(m.group(0), known[1])):
            continue
        spans.append(Span(m.start(), m.end(), known[0]))
    return spans


def _same_name(found: str, spellings: set[str]) -> bool:
    """A one-word name matches as written, with a capital first letter, or in capitals ("Mark", "MARK"), not
    in lowercase: "mark the date" is not Mark. A name of several words matches in any case."""
    found = " ".join(found.split())
    return " " in found or any(found in (s, s[:1].upper() + s[1:], s.upper()) for s in spellings)


def _walk(obj: Any, change: Any) -> Any:
    if isinstance(obj, str):
        return change(obj)
    if isinstance(obj, Mapping):
        return {key: _walk(value, change) for key, value in obj.items()}
    if isinstance(obj, list | tuple):
        return [_walk(value, change) for value in obj]
    return obj
