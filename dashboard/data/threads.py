"""What the threads page reads: pages of threads, one thread's items, notes, working state and summaries, and
message search with its highlights as Markdown (DSH-7, THR-7). The API audits every read (`thread.read`)."""

from __future__ import annotations

import json
from bisect import bisect_left
from collections.abc import Sequence
from typing import Any

import polars as pl

from dashboard.data import SHARED, _cached, model_labels, model_shown
from shared.client import CoreClient
from shared.schemas.threads import (
    ContentPart,
    FunctionCallOut,
    FunctionCallOutputOut,
    Highlight,
    InputFile,
    InputImage,
    ItemOut,
    ItemSearchQuery,
    MessageOut,
    ReasoningOut,
    RefusalPart,
    SearchPage,
    StateOut,
    ThreadOut,
    ThreadQuery,
)

# Who wrote an item, or whose note it is, when the request named nobody (the organisation's own request).
BY_ORGANISATION = "(organisation)"
CLIPPED_CHARS = 200  # tool arguments and outputs are shown this long in the items table
THREAD_SCHEMA: dict[str, Any] = {
    "id": pl.String, "owner": pl.String, "user": pl.Int64, "assistant": pl.Int64, "developer": pl.Int64,
    "metadata": pl.String, "labels": pl.String, "created_at": pl.Datetime("us", "UTC"),
    "updated_at": pl.Datetime("us", "UTC"),
}
ITEM_SCHEMA: dict[str, Any] = {
    "position": pl.Int64, "created_at": pl.Datetime("us", "UTC"), "type": pl.String, "role": pl.String,
    "writer": pl.String, "person": pl.String, "text": pl.String, "id": pl.String, "response_id": pl.String,
    "call_id": pl.String, "tool": pl.String,
}
NOTE_SCHEMA: dict[str, Any] = {"by": pl.String, "name": pl.String, "value": pl.String,
                               "updated_at": pl.Datetime("us", "UTC")}
SUMMARY_SCHEMA: dict[str, Any] = {
    "from_position": pl.Int64, "to_position": pl.Int64, "level": pl.Int64, "model": pl.String, "text": pl.String,
    "created_at": pl.Datetime("us", "UTC"), "id": pl.String,
}
# Characters Markdown (and Streamlit's `:directives:` and `$math$`) would read as syntax in a snippet.
_MARKDOWN_ESCAPES = str.maketrans({**{c: "\\" + c for c in "\\`*_{}[]()#+-.!|<>~$:&="},
                                   "\n": " ", "\r": " ", "\t": " "})


# ---------------------------------------------------------------- the list


def pairs_text(pairs: dict[str, Any]) -> str:
    """`{"a": "1", "b": "2"}` as `a:1, b:2`, the way the filters are typed."""
    return ", ".join(f"{k}:{v}" for k, v in sorted(pairs.items()))


def threads_frame(threads: Sequence[ThreadOut], tz: str) -> pl.DataFrame:
    rows = [{"id": t.id, "owner": t.subject or SHARED, "user": t.message_counts.user,
             "assistant": t.message_counts.assistant, "developer": t.message_counts.developer,
             "metadata": pairs_text(t.metadata), "labels": pairs_text(t.labels), "created_at": t.created_at,
             "updated_at": t.updated_at} for t in threads]
    return pl.DataFrame(rows, schema=THREAD_SCHEMA).with_columns(
        pl.col("created_at", "updated_at").dt.convert_time_zone(tz))


@_cached
def thread_page(client: CoreClient, filters: ThreadQuery, cursor: str | None, limit: int,
                tz: str) -> tuple[pl.DataFrame, str | None]:
    """One page of threads, newest first, and the cursor of the next (older) page."""
    page = client.threads(filters, cursor=cursor, limit=limit)
    return threads_frame(page.data, tz), page.next_cursor


# ---------------------------------------------------------------- one thread


@_cached
def thread(client: CoreClient, thread_id: str) -> ThreadOut:
    return client.thread(thread_id)


def _clip(text: str) -> str:
    return text if len(text) <= CLIPPED_CHARS else text[:CLIPPED_CHARS - 1] + "…"


def _part_text(part: ContentPart) -> str:
    if isinstance(part, InputImage):
        return f"[image {part.image_url or part.file_id or ''}]".replace(" ]", "]")
    if isinstance(part, InputFile):
        return f"[file {part.filename or part.file_id or part.file_url or ''}]".replace(" ]", "]")
    if isinstance(part, RefusalPart):
        return f"[refusal] {part.refusal}"
    return getattr(part, "text", "[audio]")


def item_text(item: ItemOut) -> str:
    """What an item says, on one table row: a message's parts joined, a tool call as `name(arguments)`."""
    if isinstance(item, MessageOut):
        return item.content if isinstance(item.content, str) else "\n".join(_part_text(p) for p in item.content)
    if isinstance(item, FunctionCallOut):
        pending = "" if item.status == "completed" else f" [{item.status}]"
        return f"{item.name}({_clip(item.arguments)}){pending}"
    if isinstance(item, FunctionCallOutputOut):
        result = f"error: {item.error}" if item.error else item.output
        return f"→ {_clip(result)}"  # `with_tool_names` puts the tool's name in front
    if isinstance(item, ReasoningOut):
        summary = " ".join(s.text for s in item.summary)
        return summary or ("[encrypted reasoning]" if item.encrypted_content else "[reasoning]")
    return item.refusal


def item_type(item: ItemOut) -> str:
    """`message`, `function_call`, …: the tag the API sends as `type` (msgspec keeps it on the class)."""
    return str(type(item).__struct_config__.tag)


def item_role(item: ItemOut) -> str:
    """A message's role; a refusal, a tool call and reasoning are the assistant's (as search reports refusals), a
    tool's result the tool's."""
    if isinstance(item, MessageOut):
        return item.role
    if isinstance(item, FunctionCallOutputOut):
        return "tool"
    return "assistant"


def item_writer(item: ItemOut) -> str:
    """Who wrote the item: the person for her own messages (the organisation when the request named nobody), the
    assistant for what a model produced (with its response, when a turn wrote it), the application for
    developer instructions; a tool's result is the tool's (named by `with_tool_names`)."""
    if isinstance(item, FunctionCallOutputOut):
        return "tool"
    role = item_role(item)
    if role == "user":
        return item.subject or BY_ORGANISATION
    if role == "developer":
        return "application (developer)"
    return f"assistant · {item.response_id}" if item.response_id else "assistant"


def items_frame(items: Sequence[ItemOut], tz: str) -> pl.DataFrame:
    rows = [{"position": i.position, "created_at": i.created_at, "type": item_type(i), "role": item_role(i),
             "writer": item_writer(i), "person": i.subject or BY_ORGANISATION, "text": item_text(i), "id": i.id,
             "response_id": i.response_id, "call_id": getattr(i, "call_id", None),
             "tool": getattr(i, "name", None) if isinstance(i, FunctionCallOut | FunctionCallOutputOut) else None}
            for i in items]
    return pl.DataFrame(rows, schema=ITEM_SCHEMA).with_columns(pl.col("created_at").dt.convert_time_zone(tz))


def with_tool_names(items: pl.DataFrame) -> pl.DataFrame:
    """A tool result names its tool: its own `name`, else that of the call with the same call id among the items
    shown, else (the call is not shown) the call id."""
    calls = items.filter(pl.col("type") == "function_call").select("call_id", pl.col("tool").alias("call_tool"))
    outputs = pl.col("type") == "function_call_output"
    named = (items.join(calls.unique("call_id", keep="first"), on="call_id", how="left", maintain_order="left")
             .with_columns(pl.coalesce("tool", "call_tool", "call_id").alias("tool_name")))
    return named.with_columns(
        pl.when(outputs).then(pl.format("{} {}", "tool_name", "text")).otherwise("text").alias("text"),
        pl.when(outputs).then(pl.format("tool {}", "tool_name")).otherwise("writer").alias("writer"),
    ).drop("call_tool", "tool_name")


@_cached
def item_page(client: CoreClient, thread_id: str, newest_first: bool, cursor: str | None, limit: int,
              tz: str) -> tuple[pl.DataFrame, str | None]:
    """One page of a thread's items in position order, and the cursor of the next page."""
    page = client.thread_items(thread_id, order="desc" if newest_first else "asc", cursor=cursor, limit=limit)
    return items_frame(page.items, tz), page.next_cursor


def loaded_items(client: CoreClient, thread_id: str, newest_first: bool, cursors: list[str | None], limit: int,
                 tz: str) -> tuple[pl.DataFrame, str | None]:
    """The item pages of `cursors` (each a cached read) as one frame, and the cursor of the page after them."""
    frames: list[pl.DataFrame] = []
    next_cursor: str | None = None
    for cursor in cursors:
        frame, next_cursor = item_page(client, thread_id, newest_first, cursor, limit, tz)
        frames.append(frame)
    return with_tool_names(pl.concat(frames)), next_cursor


def message_labels(items: pl.DataFrame) -> dict[str, str]:
    """The messages among the items, by id, as the notes picker names them: `#position · role · writer · text`."""
    return {row["id"]: f"#{row['position']} · {row['role']} · {row['person']} · {row['text'][:60]}"
            for row in items.filter(pl.col("type") == "message").iter_rows(named=True)}


@_cached
def item_notes(client: CoreClient, thread_id: str, item_id: str, tz: str) -> pl.DataFrame:
    """Every note on one message (one audited read), one row per name and value; the organisation's note is `by`
    (organisation)."""
    rows = [{"by": n.by or BY_ORGANISATION, "name": name,
             "value": value if isinstance(value, str) else json.dumps(value, ensure_ascii=False),
             "updated_at": n.updated_at}
            for n in client.item_notes(thread_id, item_id).data for name, value in sorted(n.metadata.items())]
    return pl.DataFrame(rows, schema=NOTE_SCHEMA).with_columns(pl.col("updated_at").dt.convert_time_zone(tz))


@_cached
def thread_state(client: CoreClient, thread_id: str) -> StateOut:
    return client.thread_state(thread_id)


@_cached
def summary_page(client: CoreClient, thread_id: str, cursor: str | None, limit: int,
                 tz: str) -> tuple[pl.DataFrame, str | None]:
    page = client.thread_summaries(thread_id, cursor=cursor, limit=limit)
    labels = model_labels(client)  # a replay model's summary says its answers are recorded (EXT-1)
    rows = [{"from_position": s.from_position, "to_position": s.to_position, "level": s.level,
             "model": model_shown(s.model, labels) if s.model else None,
             "text": s.text, "created_at": s.created_at, "id": s.id} for s in page.data]
    frame = pl.DataFrame(rows, schema=SUMMARY_SCHEMA)
    return frame.with_columns(pl.col("created_at").dt.convert_time_zone(tz)), page.next_cursor


def loaded_summaries(client: CoreClient, thread_id: str, cursors: list[str | None], limit: int,
                     tz: str) -> tuple[pl.DataFrame, str | None]:
    """The summary pages of `cursors` (each a cached read) as one frame, and the cursor of the page after them."""
    pages = [summary_page(client, thread_id, cursor, limit, tz) for cursor in cursors]
    return pl.concat([frame for frame, _ in pages]), pages[-1][1]


def forget_threads() -> None:
    for fn in (thread_page, thread, item_page, item_notes, thread_state, summary_page):
        fn.clear()


# ---------------------------------------------------------------- search


def search_messages(client: CoreClient, query: ItemSearchQuery, *, cursor: str | None, limit: int) -> SearchPage:
    """One page of `GET /thread-items`. Not cached: each search is an audited read the administrator asked for,
    and its pages are kept in the session."""
    return client.search_messages(query, cursor=cursor, limit=limit)


def utf16_spans(text: str, highlights: Sequence[Highlight]) -> list[tuple[int, int]]:
    """The API's highlights, [start, end) in UTF-16 code units (as JavaScript counts: a character beyond the
    Basic Multilingual Plane, such as most emoji, is two), as [start, end) indices into the Python string.

    Out-of-range ends are clipped; overlapping or touching spans are merged; empty ones dropped."""
    ends = [0]  # ends[i]: code units before text[i]
    for char in text:
        ends.append(ends[-1] + (2 if ord(char) > 0xFFFF else 1))
    spans: list[tuple[int, int]] = []
    for mark in sorted(highlights, key=lambda h: (h.start, h.end)):
        start = min(bisect_left(ends, mark.start), len(text))
        end = min(bisect_left(ends, mark.end), len(text))
        if end <= start:
            continue
        if spans and start <= spans[-1][1]:
            spans[-1] = (spans[-1][0], max(end, spans[-1][1]))
        else:
            spans.append((start, end))
    return spans


def markdown_text(text: str) -> str:
    """`text` as Markdown that shows it literally, on one line."""
    return text.translate(_MARKDOWN_ESCAPES)


def bold_snippet(snippet: str, highlights: Sequence[Highlight]) -> str:
    """A search hit's snippet as Markdown with each highlighted span in bold."""
    out: list[str] = []
    shown = 0
    for start, end in utf16_spans(snippet, highlights):
        out.append(markdown_text(snippet[shown:start]))
        out.append(f"**{markdown_text(snippet[start:end])}**")
        shown = end
    out.append(markdown_text(snippet[shown:]))
    return "".join(out)
