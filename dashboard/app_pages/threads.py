"""Threads (DSH-7): list and filter threads; read one's items with who wrote each, the notes on a message, the
working state and the summaries; search every message (THR-7)."""

from __future__ import annotations

from typing import Any, cast

import polars as pl
import streamlit as st

from dashboard import components, data, forms
from dashboard.data import shapes, threads
from shared.client import ApiError
from shared.schemas.threads import ItemSearchQuery, Role, SearchHit, SearchPage, ThreadOut

ITEMS_PER_PAGE = 100
SUMMARIES_PER_PAGE = 50
HITS_PER_PAGE = 20
ROLES = ("any", "user", "assistant", "developer")
QUERY_HELP = ('Web-search syntax: words (every one must occur), "a phrase" in quotes, `or` between alternatives, '
              "`-word` to leave a word out.")

THREAD_COLUMNS: dict[str, Any] = {
    "id": st.column_config.TextColumn("id"),
    "owner": st.column_config.TextColumn("owner", help="The person the thread belongs to, or shared"),
    "user": st.column_config.NumberColumn("user", width="small", help="Messages with role user"),
    "assistant": st.column_config.NumberColumn("assistant", width="small", help="Messages with role assistant"),
    "developer": st.column_config.NumberColumn("developer", width="small", help="Messages with role developer"),
    "metadata": st.column_config.TextColumn("metadata"),
    "labels": st.column_config.TextColumn("labels"),
    "created_at": st.column_config.DatetimeColumn("opened", format="YYYY-MM-DD HH:mm"),
    "updated_at": st.column_config.DatetimeColumn("updated", format="YYYY-MM-DD HH:mm"),
}
ITEM_COLUMNS: dict[str, Any] = {
    "position": st.column_config.NumberColumn("#", width="small"),
    "created_at": st.column_config.DatetimeColumn("at", format="YYYY-MM-DD HH:mm:ss"),
    "type": st.column_config.TextColumn("type", width="small"),
    "role": st.column_config.TextColumn("role", width="small"),
    "writer": st.column_config.TextColumn(
        "written by", help="The person for her own messages, the assistant for what a model wrote (with the "
        "response that wrote it), the application for developer instructions, the tool for a tool's result"),
    "person": st.column_config.TextColumn("for", width="small", help="The person the writing request named; "
                                          f"{threads.BY_ORGANISATION}: it named nobody"),
    "text": st.column_config.TextColumn("text", width="large"),
    "id": st.column_config.TextColumn("item id", width="medium"),
    "response_id": None,
    "call_id": None,
    "tool": None,
}
NOTE_COLUMNS: dict[str, Any] = {
    "by": st.column_config.TextColumn("by", help=f"The person whose note it is; {threads.BY_ORGANISATION}: the "
                                      "organisation's own"),
    "name": st.column_config.TextColumn("name", width="small"),
    "value": st.column_config.TextColumn("value", width="large"),
    "updated_at": st.column_config.DatetimeColumn("updated", format="YYYY-MM-DD HH:mm:ss"),
}
SUMMARY_COLUMNS: dict[str, Any] = {
    "from_position": st.column_config.NumberColumn("from #", width="small"),
    "to_position": st.column_config.NumberColumn("to #", width="small"),
    "level": st.column_config.NumberColumn("level", width="small"),
    "model": st.column_config.TextColumn("model", width="medium"),
    "text": st.column_config.TextColumn("text", width="large"),
    "created_at": st.column_config.DatetimeColumn("written", format="YYYY-MM-DD HH:mm"),
    "id": None,
}

components.page_header(
    "Threads",
    "The conversations applications keep: who wrote each item, the notes on messages, each thread's working "
    "state and summaries, and a search over every message.")
st.info("Every read on this page — the list, a thread's items, notes, working state and summaries, and each "
        "search — is recorded in the organisation's audit trail under your name (`thread.read`).",
        icon=":material/visibility:")
client = data.client()
org = data.org_id()
assert org is not None  # streamlit_app shows pages only once an organisation is chosen
tz = data.org_timezone(client, org)


# ---------------------------------------------------------------- the list


def thread_list() -> str | None:
    """The filter bar, one page of threads and *Open a thread by id*; returns the thread to show, if any."""
    with st.form("threads_filters", border=True):
        row = st.columns([2, 3, 3, 3, 2])
        owner = row[0].selectbox("Owner", forms.OWNERS, key="threads_owner", persist_state="page")
        person = row[1].text_input("Person id", key="threads_person", placeholder="with owner = one person",
                                   help="The id your application uses for her.", persist_state="page")
        metadata = row[2].text_input("Metadata", key="threads_metadata", placeholder="dossier:4711",
                                     persist_state="page")
        labels = row[3].text_input("Labels", key="threads_labels", placeholder="department:payroll",
                                   persist_state="page")
        page_size = row[4].selectbox("Threads per page", [25, 50, 100, 200], index=1, key="threads_page_size",
                                     persist_state="page")
        st.form_submit_button("Apply filters", key="threads_apply", type="primary", icon=":material/filter_alt:")
    try:
        filters = forms.checked_filter(forms.thread_filter(owner=str(owner), person=person, metadata=metadata,
                                                           labels=labels))
    except forms.FilterError as err:
        st.error(f"{err}\n\nCode `invalid_filter`", icon=":material/error:")
        return None
    except ValueError as err:
        st.error(f"{err} Write filters as `name:value`, separated by commas.\n\nCode `invalid_filter`",
                 icon=":material/error:")
        return None
    if owner == "one person" and filters.subject is None:
        st.warning("Owner is *one person* but no person id is given; showing everyone's threads.",
                   icon=":material/person_search:")

    cursors = components.cursor_stack("threads_cursors", (filters, page_size))
    try:
        frame, next_cursor = threads.thread_page(client, filters, cursors[-1], int(page_size), tz)
    except ApiError as err:
        components.api_error(err, "list the threads")
        return None
    components.pager("threads", cursors, next_cursor, labels=("Newer", "Older"),
                     caption=f"Page {len(cursors)} · {frame.height} threads, newest first · times in {tz}")

    selected: dict[str, Any] | None = None
    if frame.is_empty():
        unfiltered = filters.subject is None and not filters.metadata and not filters.label and len(cursors) == 1
        if unfiltered:
            components.empty_state("No threads yet. Applications open them when they call the API with a key; "
                                   "create a key for your application.",
                                   ("app_pages/keys.py", "Create a key", ":material/key:"), key="threads_go_keys")
        else:
            components.empty_state("No threads match these filters — choose owner *everyone* or clear a filter.")
    else:
        components.forget_selection("threads_table", (filters, page_size, tuple(cursors)))
        state = st.dataframe(frame, column_config=THREAD_COLUMNS, hide_index=True, key="threads_table",
                             on_select="rerun", selection_mode="single-row")
        rows = state.selection.rows if state is not None else []
        selected = frame.row(rows[0], named=True) if rows and rows[0] < frame.height else None
    typed = st.text_input("Open a thread by id", key="threads_open_id", placeholder="thr_…", persist_state="page",
                          help="Or select a row above; an id from a search hit or the audit log works too.").strip()
    if typed:
        return typed
    if selected is not None:
        return str(selected["id"])
    if not frame.is_empty():
        st.caption("Select a row (or type an id) to read the thread: its items, notes, working state and summaries.")
    return None


# ---------------------------------------------------------------- one thread


def loaded_items(thread_id: str, newest_first: bool) -> tuple[pl.DataFrame, str | None]:
    """The item pages loaded so far (*Load more* adds one) and the next page's cursor."""
    cursors = components.cursor_stack("threads_item_cursors", (thread_id, newest_first))
    return threads.loaded_items(client, thread_id, newest_first, cursors, ITEMS_PER_PAGE, tz)


def items_tab(thread: ThreadOut) -> None:
    newest_first = st.toggle("Newest first", key="threads_items_newest", persist_state="page")
    items, next_cursor = loaded_items(thread.id, newest_first)
    if items.is_empty():
        components.empty_state("No items yet: the application that opened this thread has not written to it.")
        return
    st.dataframe(items, column_config=ITEM_COLUMNS, hide_index=True, key="threads_items")
    components.load_more("threads_item_cursors", next_cursor, "items")
    st.caption(f"{items.height} items shown · times in {tz} · tool calls as `name(arguments)`, their results as "
               "`name → output`")


def notes_tab(thread: ThreadOut) -> None:
    # Notes are read for one chosen message only: one audited call, however many messages the thread holds.
    newest_first = bool(st.session_state.get("threads_items_newest", False))
    items, _ = loaded_items(thread.id, newest_first)
    labels = threads.message_labels(items)
    if not labels:
        components.empty_state("No messages shown yet — notes are kept on messages; load the thread's items first.")
        return
    item_id = st.selectbox("Message", list(labels), format_func=labels.__getitem__, key=f"threads_note_{thread.id}",
                           help="One of the messages shown on the Items tab (use *Load more* there for others).")
    assert item_id is not None
    try:
        notes = threads.item_notes(client, thread.id, item_id, tz)
    except ApiError as err:
        components.api_error(err, "read the notes")
        return
    if notes.is_empty():
        components.empty_state("No notes on this message: applications note messages (a status, a category) "
                               "for themselves; none has noted this one.")
        return
    st.dataframe(notes, column_config=NOTE_COLUMNS, hide_index=True, key="threads_notes")


def state_tab(thread: ThreadOut) -> None:
    try:
        state = threads.thread_state(client, thread.id)
    except ApiError as err:
        components.api_error(err, "read the working state")
        return
    if state.version == 0:
        components.empty_state("No working state yet: the application keeps none for this thread.")
        return
    cols = st.columns(3)
    cols[0].metric("Version", state.version)
    cols[1].metric("Size", f"{state.size:,} bytes")
    cols[2].metric("Updated", data.local_time(state.updated_at, tz) if state.updated_at else "never")
    components.fields_table(shapes.fields_frame(state.state), key="threads_state_fields")
    components.raw_json(state.state)


def summaries_tab(thread: ThreadOut) -> None:
    cursors = components.cursor_stack("threads_summary_cursors", thread.id)
    try:
        summaries, next_cursor = threads.loaded_summaries(client, thread.id, cursors, SUMMARIES_PER_PAGE, tz)
    except ApiError as err:
        components.api_error(err, "read the summaries")
        return
    if summaries.is_empty():
        components.empty_state("No summaries yet — a summary is written when a long conversation is compacted "
                               "during its turns.")
        return
    st.dataframe(summaries, column_config=SUMMARY_COLUMNS, hide_index=True, key="threads_summaries")
    components.load_more("threads_summary_cursors", next_cursor, "summaries")


def thread_detail(thread_id: str) -> None:
    try:
        thread = threads.thread(client, thread_id)
    except ApiError as err:
        components.api_error(err, f"read thread {thread_id}")
        return
    st.divider()
    st.subheader(f"Thread `{thread.id}`")
    counts = thread.message_counts
    st.markdown(" · ".join([
        f"owner **{threads.markdown_text(thread.subject or data.SHARED)}**",
        f"{counts.user} user, {counts.assistant} assistant, {counts.developer} developer messages",
        f"opened {data.local_time(thread.created_at, tz)}",
        f"updated {data.local_time(thread.updated_at, tz)}"]))
    if thread.metadata or thread.labels:
        st.caption(f"metadata {threads.markdown_text(threads.pairs_text(thread.metadata)) or 'none'} · "
                   f"labels {threads.markdown_text(threads.pairs_text(thread.labels)) or 'none'}")
    # Lazy tabs: only the open one runs, so only what is looked at is read (and audited).
    tabs = st.tabs(["Items", "Notes", "Working state", "Summaries"], key="threads_detail", on_change="rerun")
    for tab, show in zip(tabs, (items_tab, notes_tab, state_tab, summaries_tab), strict=True):
        if tab.open:
            with tab:
                show(thread)


# ---------------------------------------------------------------- search


def open_thread(thread_id: str) -> None:
    """A search hit's *Open thread*: the Threads tab, with that thread open."""
    st.session_state["threads_open_id"] = thread_id
    st.session_state["threads_view"] = "Threads"


def show_hit(number: int, hit: SearchHit) -> None:
    with st.container(border=True):
        st.markdown(threads.bold_snippet(hit.snippet, hit.highlights))
        who = hit.role or hit.type
        refusal = " (refusal)" if hit.type == "refusal" else ""
        note = (f" · note {threads.markdown_text(threads.pairs_text(hit.metadata))} by "
                f"{threads.markdown_text(hit.metadata_by or threads.BY_ORGANISATION)}" if hit.metadata else "")
        left, right = st.columns([5, 1], vertical_alignment="center")
        left.caption(f"{who}{refusal} · written by {threads.markdown_text(hit.subject or threads.BY_ORGANISATION)} · "
                     f"{data.local_time(hit.created_at, tz)} · thread `{hit.thread_id}` · "
                     f"item `{hit.item_id}`{note}")
        right.button("Open thread", key=f"threads_hit_{number}", icon=":material/forum:", on_click=open_thread,
                     args=(hit.thread_id,))


def search_view() -> None:
    with st.form("threads_search_form", border=True):
        q = st.text_input("Words to find", key="threads_q", placeholder='refund "bank account" or iban -test',
                          help=QUERY_HELP, persist_state="page")
        row = st.columns(4)
        role = row[0].selectbox("Role", ROLES, key="threads_search_role", persist_state="page")
        in_thread = row[1].text_input("In thread", key="threads_search_thread", placeholder="thr_… (every thread)",
                                      persist_state="page")
        start = row[2].date_input("From", value=None, key="threads_search_from", help=f"First day, in {tz}",
                                  persist_state="page")
        end = row[3].date_input("To", value=None, key="threads_search_to", help=f"Last day (included), in {tz}",
                                persist_state="page")
        notes = st.columns(2)
        note = notes[0].text_input("Note", key="threads_search_note", placeholder="status:open",
                                   help="Find messages that carry this note (`name:value`), with or without words.",
                                   persist_state="page")
        note_by = notes[1].text_input("Notes by", key="threads_search_note_by", persist_state="page",
                                      placeholder="a person's id; empty: the organisation's notes")
        submitted = st.form_submit_button("Search", key="threads_search_submit", type="primary",
                                          icon=":material/search:")
    st.caption(f"{QUERY_HELP} Newest first; each page reads at most 7 days of history, so a page may be short.")

    if submitted:
        st.session_state.pop("threads_search", None)
        try:
            query = forms.message_search(q=q, role=None if role == "any" else cast(Role, role), thread_id=in_thread,
                                         start=start, end=end, notes=note, notes_by=note_by, tz=tz)
            first = threads.search_messages(client, query, cursor=None, limit=HITS_PER_PAGE)
        except ValueError as err:
            st.error(f"{err} Write the note as `name:value`.\n\nCode `invalid_filter`", icon=":material/error:")
            return
        except ApiError as err:
            components.api_error(err, "search the messages")
            return
        st.session_state["threads_search"] = {"query": query, "pages": [first]}
    found: dict[str, Any] | None = st.session_state.get("threads_search")
    if found is None:
        components.empty_state("Type words to find (or a note), then press Search.")
        return
    asked: ItemSearchQuery = found["query"]
    pages: list[SearchPage] = found["pages"]
    hits = [hit for page in pages for hit in page.data]
    last = pages[-1]
    reach = f"searched back to {last.searched_to:%Y-%m-%d}" if last.searched_to else "searched all history"
    more = "" if last.next_cursor else " · no older messages to search"
    st.caption(f"{len(hits)} hit{'' if len(hits) == 1 else 's'}, newest first · {reach} ({tz}){more}")
    if not hits:
        components.empty_state(
            f"No hits back to {last.searched_to:%Y-%m-%d} — press *Search further back* for older messages."
            if last.next_cursor and last.searched_to else
            "No messages match — try other words, fewer exclusions or a longer period.")
    for number, hit in enumerate(hits):
        show_hit(number, hit)
    if st.button("Search further back", key="threads_search_more", icon=":material/history:",
                 disabled=last.next_cursor is None):
        try:
            pages.append(threads.search_messages(client, asked, cursor=last.next_cursor, limit=HITS_PER_PAGE))
        except ApiError as err:
            components.api_error(err, "search further back")
            return
        st.rerun()


# Lazy tabs: only the open one runs. Widgets keep their values while hidden (persist_state="page").
browse, search = st.tabs(["Threads", "Search messages"], key="threads_view", on_change="rerun")
if browse.open:
    with browse:
        chosen = thread_list()
        if chosen:
            thread_detail(chosen)
if search.open:
    with search:
        search_view()
