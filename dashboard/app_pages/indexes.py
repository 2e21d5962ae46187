"""Indexes: create an index (its name and how its records are embedded), see each index's store, delete one."""

from __future__ import annotations

import streamlit as st

from dashboard import components, data
from dashboard.data import index_admin, overview, stores
from shared.client import ApiError

components.page_header(
    "Indexes",
    "Each index is a memory store: the records written to it, its settings, and how its records are embedded "
    "for search.")
client = data.client()
org = data.org_id()
assert org is not None  # streamlit_app shows pages only once an organisation is chosen
listed = data.indexes(client)

notice = st.session_state.pop("indexes_notice", None)
if notice:
    st.success(notice, icon=":material/check_circle:")


def field_error(*params: str) -> None:
    """The API's refusal of one of these fields, right under it."""
    err: ApiError | None = st.session_state.get("indexes_error")
    if err is not None and err.param in params:
        components.api_error(err, "create the index")


def create_form() -> None:
    name = st.text_input("Name", key="indexes_name", placeholder="handbook",
                         help="How administrators and keys' policies tell this index apart; unique in the "
                              "organisation.")
    field_error("name")
    provider = st.radio("Embedding", list(index_admin.EMBEDDINGS), key="indexes_provider", horizontal=True,
                        format_func=lambda p: index_admin.EMBEDDINGS[p].label,
                        help="How records are turned into vectors for search by meaning. Changing it later "
                             "(PATCH /indexes/{id}) re-embeds every record in the background.")
    choice = index_admin.EMBEDDINGS[str(provider)]
    st.caption(choice.help)
    field_error("embedding", "embedding.provider")
    model, dimensions, base_url = "", None, ""
    if provider != "none":
        cols = st.columns([3, 1, 3])
        model = cols[0].text_input("Model", value=choice.model, key=f"indexes_model_{provider}",
                                   placeholder="the provider's default")
        dimensions = cols[1].number_input("Dimensions", value=choice.dimensions, step=1,
                                          key=f"indexes_dimensions_{provider}", placeholder="default")
        if choice.base_url:
            base_url = cols[2].text_input("Server address", key="indexes_base_url",
                                          placeholder="https://api.openai.com/v1 (empty: OpenAI)")
        field_error("embedding.model", "embedding.dimensions", "embedding.base_url")
    err: ApiError | None = st.session_state.get("indexes_error")
    if err is not None and err.param not in ("name", "embedding", *index_admin.EMBEDDING_FIELDS):
        components.api_error(err, "create the index")
    if st.button("Create index", key="indexes_create", type="primary", icon=":material/add:"):
        st.session_state.pop("indexes_error", None)
        if not name.strip():
            st.session_state["indexes_error"] = ApiError(0, "name_required", "Give the index a name.", "name")
            st.rerun()
        body = index_admin.index_body(name=name, provider=str(provider), model=model,
                                  dimensions=int(dimensions) if dimensions else None, base_url=base_url)
        try:
            made = index_admin.create_index(client, body)
        except ApiError as failed:
            st.session_state["indexes_error"] = failed
            st.rerun()
        st.session_state["indexes_notice"] = f"Created index {made.name} (`{made.id}`)."
        st.session_state["indexes_open"] = made.id
        st.rerun()


with st.expander("Create an index", icon=":material/add:",
                 expanded=listed.is_empty() or "indexes_error" in st.session_state):
    create_form()

if listed.is_empty():
    components.empty_state("No indexes yet: create the first one above. Applications then write records to it "
                           "with a key.")
    st.stop()

counts, _ = overview.store_counts(client)
frame = index_admin.indexes_frame(listed, counts)
state = st.dataframe(frame, hide_index=True, key="indexes_table", on_select="rerun", selection_mode="single-row",
                     column_config={
                         "name": st.column_config.TextColumn("name", pinned=True),
                         "id": st.column_config.TextColumn("id", width=250),
                         "embedding": st.column_config.TextColumn("embedding", help="provider · model · dimensions"),
                         "records": st.column_config.NumberColumn("records", help="Active, unexpired records"),
                         "shared": st.column_config.NumberColumn("shared", help="Of which shared (nobody's)"),
                         "created_at": st.column_config.DatetimeColumn("created", format="YYYY-MM-DD")})
st.caption("Record counts are read by the API over every store and recorded in the audit trail as a read.")
rows = state.selection.rows if state is not None else []
if rows and rows[0] < frame.height:
    st.session_state["indexes_open"] = frame["id"][rows[0]]
index_id = st.session_state.get("indexes_open")
names = data.names(listed)
if index_id not in names:
    st.caption("Select an index to see its store: records by type, settings, and what you can do with it.")
    st.stop()

st.divider()
st.subheader(f"{names[index_id]} · `{index_id}`")
mine = counts.filter(counts["store"] == index_id)
cols = st.columns(3)
cols[0].metric("Records", int(mine["records"].sum()))
cols[1].metric("Personal", int(mine.filter(mine["owner"] != data.SHARED)["records"].sum()))
cols[2].metric("Shared", int(mine.filter(mine["owner"] == data.SHARED)["records"].sum()))
if mine.is_empty():
    st.caption("No records yet: applications write them with a key whose policy names this index (or every index).")
else:
    components.record_counts_table(overview.counts_by_store(mine, names), key="indexes_counts")
try:
    settings = stores.store_settings(client, index_id)
    customised = ", ".join(settings.customised) or "none — every section has its defaults"
    st.markdown(f"**Store settings:** customised {customised}.")
except ApiError as err:
    components.api_error(err, "read the store's settings")

actions = st.container(horizontal=True)
if actions.button("Edit its settings", key="indexes_to_stores", icon=":material/tune:"):
    st.session_state["stores_store"] = index_id
    st.switch_page("app_pages/stores.py")
if actions.button("Browse its records", key="indexes_to_records", icon=":material/database:"):
    st.session_state["records_store"] = index_id
    st.switch_page("app_pages/records.py")

with st.expander("Delete this index", icon=":material/delete:"):
    st.warning("Deleting an index deletes every record in it and its settings. It cannot be undone.",
               icon=":material/warning:")
    typed = st.text_input(f"Type the index's name ({names[index_id]}) to confirm", key=f"indexes_confirm_{index_id}")
    if st.button("Delete index", key="indexes_delete", type="primary", icon=":material/delete_forever:",
                 disabled=typed.strip() != names[index_id]):
        try:
            index_admin.delete_index(client, index_id)
        except ApiError as err:
            components.api_error(err, "delete the index")
        else:
            st.session_state.pop("indexes_open", None)
            st.session_state["indexes_notice"] = f"Deleted index {names[index_id]} with its records."
            st.rerun()
