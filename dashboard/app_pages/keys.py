"""Keys: the organisation's API keys with their capabilities, status and last use; create one (its secret is shown
once), revoke or delete one, edit its memory configuration and policy, and read its audit trail."""

from __future__ import annotations

from typing import Literal

import streamlit as st

from dashboard import components, data, key_editors
from dashboard.data import key_admin
from shared.client import ApiError

KEY_COLUMNS = {
    "name": st.column_config.TextColumn("name", pinned=True),
    "status": st.column_config.TextColumn("status", width=65),
    "capabilities": st.column_config.MultiselectColumn("capabilities", color="auto", width=470),
    "last_used": st.column_config.TextColumn("last used", width=125, help="To the minute"),
    "expires": st.column_config.TextColumn("expires", width=100),
    "id": st.column_config.TextColumn("id", width=215),
}
STATUS_COLOURS: dict[str, Literal["green", "red", "gray"]] = {"active": "green", "revoked": "red", "expired": "gray"}

components.page_header(
    "Keys",
    "The API keys applications use: what each may do, whether it is in use, and what it injects into turns.")
client = data.client()
org = data.org_id()
assert org is not None  # streamlit_app shows pages only once an organisation is chosen
tz = data.org_timezone(client, org)

notice = st.session_state.pop("keys_notice", None)
if notice:
    st.success(notice, icon=":material/check_circle:")
created = st.session_state.pop("keys_new_secret", None)
if created is not None:
    name, secret = created
    with st.container(border=True, key="keys_secret_box"):
        st.markdown(f"**The secret of {name}** — copy it now (the button at the right of the box): it is shown "
                    "this once and cannot be read again.")
        st.code(secret, language=None)
        st.caption("Applications send it as `Authorization: Bearer <secret>`.")

listed = data.keys(client, org)

with st.expander("Create a key", icon=":material/add:", expanded=listed.height <= 1 or "keys_create_error"
                 in st.session_state):
    with st.form("keys_create_form", border=False):
        top = st.columns([2, 3])
        new_name = top[0].text_input("Name", key="keys_new_name", placeholder="support assistant",
                                     help="Say which application uses it.")
        capabilities = top[1].multiselect("Capabilities", key_admin.CAPABILITIES,
                                          default=key_admin.DEFAULT_CAPABILITIES, key="keys_new_capabilities",
                                          help=key_admin.CAPABILITY_HELP)
        bottom = st.columns([2, 3])
        expires = bottom[0].date_input("Works until", value=None, key="keys_new_expires",
                                       help=f"The last day it works, in {tz}; empty: until revoked.")
        may_write = bottom[1].checkbox("May write memory records", value=True, key="keys_new_may_write",
                                       help="Adds a rule permitting writes to the default policy; without it the "
                                            "key only reads. Edit the policy afterwards for finer rules.")
        submitted = st.form_submit_button("Create key", key="keys_create", type="primary", icon=":material/key:")
    failed: ApiError | None = st.session_state.get("keys_create_error")
    if failed is not None:
        components.api_error(failed, "create the key")
    if submitted:
        st.session_state.pop("keys_create_error", None)
        try:
            body = key_admin.create_body(name=new_name, capabilities=list(capabilities), expires=expires, tz=tz)
            made = key_admin.create_key(client, org, body, may_write=may_write)
        except ApiError as err:
            st.session_state["keys_create_error"] = err
            st.rerun()
        st.session_state["keys_new_secret"] = (made.name, made.secret)
        st.session_state["keys_open"] = made.id
        st.rerun()

if listed.is_empty():
    components.empty_state("No keys yet: create one above for each application that calls the API.")
    st.stop()

state = st.dataframe(key_admin.keys_table(listed, tz), hide_index=True, key="keys_table", on_select="rerun",
                     selection_mode="single-row", column_config=KEY_COLUMNS, column_order=list(KEY_COLUMNS))
rows = state.selection.rows if state is not None else []
if rows and rows[0] < listed.height:
    st.session_state["keys_open"] = listed["id"][rows[0]]
key_id = str(st.session_state.get("keys_open") or "")
if key_id not in set(listed["id"].to_list()):
    st.caption("Select a key to change it, see its memory configuration and policy, or read its audit trail.")
    st.stop()

try:
    key = key_admin.key(client, org, key_id)
except ApiError as err:
    components.api_error(err, f"read key {key_id}")
    st.stop()

st.divider()
head = st.container(horizontal=True, vertical_alignment="center")
head.subheader(f"{key.name} · `{key.id}`", anchor=False, width="content")
head.badge(key.status, color=STATUS_COLOURS.get(key.status, "gray"))
used = data.local_time(key.last_used_at, tz) if key.last_used_at else "never"
st.caption(f"created {data.local_time(key.created_at, tz)} · last used {used} · "
           f"expires {data.local_time(key.expires_at, tz) if key.expires_at else 'never'} · times in {tz}")

tabs = st.tabs(["Capabilities and status", "Memory configuration", "Policy", "Audit trail"], key="keys_tabs",
               on_change="rerun")
if tabs[0].open:
    with tabs[0]:
        with st.form(f"keys_caps_form_{key.id}", border=False):
            v = f"{key.id}_{key.updated_at.timestamp()}"
            renamed = st.text_input("Name", key.name, key=f"keys_rename_{v}")
            caps = st.multiselect("Capabilities", key_admin.CAPABILITIES, default=[c for c in key.capabilities
                                                                              if c in key_admin.CAPABILITIES],
                                  key=f"keys_caps_{v}", help=key_admin.CAPABILITY_HELP)
            save_caps = st.form_submit_button("Save name and capabilities", key="keys_caps_save", type="primary",
                                              icon=":material/save:")
        if save_caps:
            try:
                key_admin.update_key(client, org, key.id, {"name": renamed.strip(), "capabilities": list(caps)})
            except ApiError as err:
                components.api_error(err, "save the key")
            else:
                st.session_state["keys_notice"] = f"Saved {renamed.strip()}."
                st.rerun()
        st.markdown("**End this key**")
        st.caption("Revoking stops the key at once and keeps it listed; deleting removes it (only its audit trail "
                   "remembers it). Applications using it get refused either way.")
        actions = st.container(horizontal=True)
        if actions.button("Revoke…", key="keys_revoke", icon=":material/block:", disabled=key.status == "revoked"):
            st.session_state["keys_confirm"] = ("revoke", key.id)
        if actions.button("Delete…", key="keys_delete", icon=":material/delete:"):
            st.session_state["keys_confirm"] = ("delete", key.id)
        confirm = st.session_state.get("keys_confirm")
        if confirm is not None and confirm[1] == key.id:
            verb = confirm[0]
            st.warning(f"{verb.capitalize()} {key.name}? Applications using it stop working.",
                       icon=":material/warning:")
            yes_no = st.container(horizontal=True)
            if yes_no.button(f"Yes, {verb}", key="keys_confirm_yes", type="primary"):
                st.session_state.pop("keys_confirm", None)
                try:
                    if verb == "revoke":
                        key_admin.revoke_key(client, org, key.id)
                    else:
                        key_admin.delete_key(client, org, key.id)
                        st.session_state.pop("keys_open", None)
                except ApiError as err:
                    components.api_error(err, f"{verb} the key")
                else:
                    st.session_state["keys_notice"] = f"{key.name} is {verb}d."
                    st.rerun()
            if yes_no.button("Cancel", key="keys_confirm_no"):
                st.session_state.pop("keys_confirm", None)
                st.rerun()
if tabs[1].open:
    with tabs[1]:
        key_editors.memory_editor(client, org, key, data.names(data.indexes(client)))
if tabs[2].open:
    with tabs[2]:
        key_editors.policy_editor(client, org, key)
if tabs[3].open:
    with tabs[3]:
        try:
            entries = key_admin.key_trail(client, org, key.id)
        except ApiError as err:
            components.api_error(err, "read the key's audit trail")
        else:
            if not entries:
                components.empty_state("No entries: the key's trail is kept for a limited time, and older entries "
                                       "are gone.")
            else:
                key_editors.trail(key_admin.trail_frame(entries, tz), entries, key.id)
