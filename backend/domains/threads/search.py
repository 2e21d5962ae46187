"""Message search (THR-7) and search by note (THR-8): query checks, slices of history, snippets and highlights."""

from __future__ import annotations

import re
from datetime import date, datetime
from typing import Any
from zoneinfo import ZoneInfo

from backend.errors import BadRequest

WINDOW_DAYS = 7  # one page reads at most this many calendar days of history
SNIPPET_WORDS = 30
# Private-use characters mark matches in ts_headline's output; they are stripped and turned into offsets.
START, STOP = "\ue000", "\ue001"
HEADLINE_OPTIONS = (f"StartSel={START}, StopSel={STOP}, MaxWords={SNIPPET_WORDS}, MinWords=20, ShortWord=0, "
                    "HighlightAll=false, MaxFragments=0")

_TOKEN = re.compile(r'-?"[^"]*"?|\S+')
_WORD = re.compile(r"\w")


def check_query(q: str) -> str:
    """Web-search syntax: a query needs at least one word to look for; exclusions alone find nothing useful."""
    positive = negative = 0
    for token in _TOKEN.findall(q):
        if token.lower() == "or":
            continue
        if token.startswith("-") and len(token) > 1:
            negative += _WORD.search(token) is not None
        elif _WORD.search(token):
            positive += 1
    if positive == 0 and negative > 0:
        raise BadRequest("A query of only exclusions (`-word`) has nothing to look for; add a word or a phrase.",
                         param="q", code="exclusions_only")
    if positive == 0:
        raise BadRequest("`q` holds no word to search for.", param="q", code="empty_query")
    return q


# The words a snippet marks, at most this many: ts_headline's time grows with the query's terms times the
# message's words, and a query repeating one word 200 times took seconds over a 3,000-word message.
HEADLINE_TERMS = 16


def headline_query(q: str) -> str:
    """The words and phrases of `q` to mark in a snippet, each once (case and trailing punctuation aside, as the
    `simple` configuration reads them), without exclusions (a hit holds none): all of them (a space) or any (`or`)
    as `q` asks. Matching still uses `q` itself."""
    terms: list[str] = []
    for token in _TOKEN.findall(q):
        if token.lower() == "or" or (token.startswith("-") and len(token) > 1):
            continue
        term = token.lower() if token.startswith('"') else token.strip(".,;:!?()[]{}'").lower()
        if _WORD.search(term) and term not in terms:
            terms.append(term)
        if len(terms) == HEADLINE_TERMS:
            break
    joiner = " or " if any(t.lower() == "or" for t in _TOKEN.findall(q)) else " "
    return joiner.join(terms)


_MARKERS = re.compile(f"([{START}{STOP}])")


def _units(piece: str) -> int:
    """Length in UTF-16 code units: one per character, two for one beyond the Basic Multilingual Plane."""
    if piece.isascii():
        return len(piece)
    return len(piece.encode("utf-16-le", "surrogatepass")) // 2


def highlighted(headline: str) -> tuple[str, list[dict[str, int]]]:
    """Strip the markers and return the snippet with each match's [start, end) in UTF-16 code units.

    Works on the runs of text between markers (split and measured in C), not character by character."""
    if START not in headline:
        return headline.replace(STOP, ""), []
    out: list[str] = []
    spans: list[dict[str, int]] = []
    units = 0
    start: int | None = None
    gap_is_space = False
    for piece in _MARKERS.split(headline):
        if piece == START:
            start = units
        elif piece == STOP:
            if start is not None and units > start:
                if spans and gap_is_space:
                    spans[-1]["end"] = units  # the words of a phrase, one space apart, read as one highlight
                else:
                    spans.append({"start": start, "end": units})
                gap_is_space = True
            start = None
        elif piece:
            if start is None and not piece.isspace():
                gap_is_space = False
            out.append(piece)
            units += _units(piece)
    return "".join(out), spans


def plain_snippet(text: str) -> str:
    words = text.split()
    return " ".join(words[:SNIPPET_WORDS])


def local_date(instant: datetime, tz: str) -> date:
    try:
        zone = ZoneInfo(tz)
    except (ValueError, KeyError):
        zone = ZoneInfo("UTC")
    return instant.astimezone(zone).date()


def hit_document(row: dict[str, Any], with_note: bool) -> dict[str, Any]:
    if row.get("headline") is not None:
        snippet, spans = highlighted(row["headline"])
    else:  # a search by note alone: no words to mark, and the statement returns the text instead
        snippet, spans = plain_snippet((row.get("text") or "").replace(START, "").replace(STOP, "")), []
    doc: dict[str, Any] = {"thread_id": row["thread_id"], "item_id": row["id"], "type": row["type"],
                           "role": row["role"], "subject": row["subject"], "created_at": row["created_at"],
                           "snippet": snippet, "highlights": spans}
    if with_note:
        doc["metadata"] = row["note"]
        doc["metadata_by"] = row["note_author"] or None
    return doc
