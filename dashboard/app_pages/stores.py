"""Stores (DSH-4): a store's settings per section, effective against default; edit a section after seeing the change."""

from __future__ import annotations

from typing import Any

import streamlit as st

from dashboard import components, data, forms
from dashboard.data import shapes, stores
from shared.client import ApiError
from shared.schemas.stores import StoreSettingsOut

HISTORY_LIMIT = 50

components.page_header("Stores", "How each store injects, keeps commitments, learns lessons, promotes and maintains "
                                 "its records.")
client = data.client()
org = data.org_id()
assert org is not None  # streamlit_app shows pages only once an organisation is chosen
tz = data.org_timezone(client, org)
index_id, names = components.choose_store(client, key="stores", why="each index is a memory store")
try:
    settings = stores.store_settings(client, index_id)
except ApiError as err:
    components.api_error(err, "read the store's settings")
    st.stop()

# A new store, or settings saved since the editors were filled: start the editors from the API's values.
loaded = (index_id, settings.updated_at)
if st.session_state.get("stores_loaded") != loaded:
    # A refusal belongs to the store it was made on: clear it with the editors' values.
    editors = ("stores_field_", "stores_pending_", "stores_error_")
    for key in [k for k in st.session_state if str(k).startswith(editors)]:
        del st.session_state[key]
    st.session_state["stores_loaded"] = loaded

notice = st.session_state.pop("stores_notice", None)
if notice:
    st.success(notice, icon=":material/check_circle:")
changed = f"last change {settings.updated_at:%Y-%m-%d %H:%M} UTC" if settings.updated_at else "never changed"
st.caption(f"Customised sections: {', '.join(settings.customised) or 'none — every section has its defaults'} · "
           f"budget ceiling of this installation: {settings.max_budget_tokens} tokens · {changed}. "
           "Values that differ from the default are highlighted.")


def field_widget(section: str, name: str, current: Any) -> Any:
    """The editor of one setting, chosen by its value's kind; name/value rows for maps."""
    key = f"stores_field_{section}_{name}"
    label, help_text = stores.setting_text(section, name)
    choices = stores.SETTING_CHOICES.get(f"{section}.{name}")
    if choices:
        return st.selectbox(label, choices, index=choices.index(current), key=key, help=help_text)
    if isinstance(current, bool):
        return st.checkbox(label, value=current, key=key, help=help_text)
    if isinstance(current, int) or current is None:
        return st.number_input(label, value=current, step=1, key=key, placeholder="none (no limit)", help=help_text)
    return components.pairs_editor(label, shapes.pairs_frame(current), key=key, help=help_text)


def field_error(section: str, name: str) -> None:
    """The API's (or the editor's) refusal of this very field, shown right under it."""
    err: ApiError | None = st.session_state.get(f"stores_error_{section}")
    if err is not None and names_field(err.param, section, name):
        components.api_error(err, f"save `{section}.{name}`")


def names_field(param: str | None, section: str, name: str) -> bool:
    """Whether a refusal's `param` is this field or lies inside it (`promotion.labels.team`, `…budgets[0]`)."""
    field = f"{section}.{name}"
    return param is not None and (param == field or param.startswith((f"{field}.", f"{field}[")))


def editor(section: str, settings: StoreSettingsOut) -> None:
    before, _ = stores.section_values(settings, section)
    stored = stores.stored_values(settings, section, before)
    pending_key = f"stores_pending_{section}"
    with st.form(f"stores_form_{section}", border=False):
        entered = {}
        for name, current in before.items():
            entered[name] = field_widget(section, name, current)
            field_error(section, name)
        review = st.form_submit_button("Review change", key=f"stores_review_{section}", icon=":material/difference:")
    err: ApiError | None = st.session_state.get(f"stores_error_{section}")
    if err is not None and not any(names_field(err.param, section, name) for name in before):
        components.api_error(err, f"save `{section}`")
    if review:
        st.session_state.pop(f"stores_error_{section}", None)
        try:
            after = stores.unpinned(forms.section_input(before, entered, section), before, stored)
        except forms.FieldError as bad:
            st.session_state[f"stores_error_{section}"] = ApiError(0, "invalid_json", bad.message, bad.param)
            st.session_state.pop(pending_key, None)
            st.rerun()
        if after == stored:
            st.session_state.pop(pending_key, None)
            st.info("Nothing changed.", icon=":material/info:")
        else:
            st.session_state[pending_key] = after
    pending: dict[str, Any] | None = st.session_state.get(pending_key)
    if pending is None:
        return
    st.markdown("**The change** — before → after; saving replaces the whole section:")
    st.dataframe(stores.section_diff(stored, pending, section), hide_index=True, key=f"stores_diff_{section}")
    buttons = st.container(horizontal=True)
    if buttons.button("Save", key=f"stores_save_{section}", type="primary", icon=":material/save:"):
        try:
            stores.save_section(client, settings.index_id, section, pending)
        except ApiError as failed:
            st.session_state[f"stores_error_{section}"] = failed
            st.rerun()
        st.session_state.pop(f"stores_error_{section}", None)
        st.session_state.pop(pending_key, None)
        st.session_state["stores_notice"] = f"Saved `{section}` of {names[settings.index_id]}."
        st.rerun()
    if buttons.button("Discard", key=f"stores_discard_{section}", icon=":material/undo:"):
        st.session_state.pop(pending_key, None)
        st.session_state.pop(f"stores_error_{section}", None)
        st.rerun()


for section in stores.SETTINGS_SECTIONS:
    title = stores.SECTION_TITLES[section]
    with st.container(border=True, key=f"stores_card_{section}"):
        head = st.container(horizontal=True, vertical_alignment="center")
        head.subheader(title, anchor=False, width="content")
        if section in settings.customised:
            head.badge("customised", icon=":material/tune:", color="orange")
        else:
            head.badge("defaults", icon=":material/check:", color="gray")
        st.caption(stores.SECTION_PURPOSE[section])
        idle = stores.idle_warning(settings, section)
        if idle:
            st.warning(idle, icon=":material/warning:")
        values, edit = st.columns([1, 1])
        with values:
            components.settings_table(stores.section_frame(settings, section), key=f"stores_values_{section}")
        with edit, st.expander(f"Edit {title.lower()}", icon=":material/edit:",
                               expanded=f"stores_pending_{section}" in st.session_state
                               or f"stores_error_{section}" in st.session_state):
            editor(section, settings)

st.subheader("Settings history")
st.caption(f"Every `{stores.SETTINGS_CHANGED}` event of this store, newest first (times in {tz}); reading the trail "
           "is itself recorded as `audit.read`.")
try:
    history = stores.settings_history(client, index_id, HISTORY_LIMIT, tz)
except ApiError as err:
    components.api_error(err, "read the settings history")
    st.stop()
if history.is_empty():
    components.empty_state("No settings changes yet: this store has run on its defaults since it was made.")
else:
    selected = components.events_table(history, key="stores_history", selectable=True)
    if selected is not None:
        components.event_detail(selected)
