"""The keys page's editors: a key's memory configuration (tools, injection block, decay) and its policy document.

Each sends what the administrator entered to the API as it is; a refusal is shown under the field whose path the
API names (`memory.injection.limit`, `policy.rules[2].kind`), and the rule a policy refusal names is highlighted.
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl
import streamlit as st

from dashboard import components
from dashboard.data import key_admin, shapes
from shared.client import ApiError, CoreClient
from shared.schemas.platform import KeyOut

MEMORY_ERROR = "keys_memory_error"
POLICY_ERROR = "keys_policy_error"


def _error_at(state_key: str, *prefixes: str, doing: str) -> None:
    """The refusal kept under `state_key`, shown here when its path starts with one of `prefixes`."""
    err: ApiError | None = st.session_state.get(state_key)
    if err is not None and err.param is not None and err.param.startswith(prefixes):
        components.api_error(err, doing)


def _saved(message: str) -> None:
    st.session_state["keys_notice"] = message
    st.rerun()


def memory_editor(client: CoreClient, org: str, key: KeyOut, stores: dict[str, str]) -> None:
    memory: dict[str, Any] = key.memory or {}
    injection: dict[str, Any] = memory.get("injection") or {}
    v = f"{key.id}_{key.updated_at.timestamp()}"  # a saved change starts the form from the API's values
    doing = "save the memory configuration"
    with st.form(f"keys_memory_form_{key.id}", border=False):
        st.markdown("**Tools a model may be offered**")
        tools = st.columns(2)
        retrieval = tools[0].checkbox("Search tool", value=bool(memory.get("retrieval_tool", True)),
                                      key=f"keys_retrieval_{v}", help="The model may search the memory of the "
                                                                      "indexes this key reaches.")
        write = tools[1].checkbox("Write tool", value=bool(memory.get("write_tool", False)), key=f"keys_write_{v}",
                                  help="The model may write memory records (the policy must permit writes too).")
        _error_at(MEMORY_ERROR, "memory.retrieval_tool", "memory.write_tool", "memory.injection.enabled",
                  doing=doing)
        st.markdown("**Injection block** — what every turn with this key is given from memory")
        inject = st.checkbox("Inject memory into turns", value=bool(injection), key=f"keys_inject_{v}")
        row = st.columns([2, 1, 2])
        options = list(stores)
        current = injection.get("index_id")
        index_id = row[0].selectbox("Store", options, key=f"keys_inj_index_{v}",
                                    index=options.index(current) if current in options else None,
                                    format_func=lambda i: f"{stores[i]} · {i}", placeholder="choose a store")
        with row[0]:
            _error_at(MEMORY_ERROR, "memory.injection.index_id", doing=doing)
        enabled = row[1].toggle("Enabled", value=bool(injection.get("enabled", True)), key=f"keys_inj_enabled_{v}",
                                help="Off keeps the block but injects nothing.")
        types = row[2].multiselect("Types", ["fact", "preference", "behaviour", "commitment", "lesson", "episode"],
                                   default=list(injection.get("types") or []), accept_new_options=True,
                                   key=f"keys_inj_types_{v}", placeholder="every type")
        with row[2]:
            _error_at(MEMORY_ERROR, "memory.injection.types", doing=doing)
        numbers = st.columns(3)
        min_confidence = numbers[0].number_input("Minimum confidence", value=injection.get("min_confidence"),
                                                 step=0.05, key=f"keys_inj_min_{v}", placeholder="none",
                                                 help="Records below this effective confidence are left out.")
        with numbers[0]:
            _error_at(MEMORY_ERROR, "memory.injection.min_confidence", doing=doing)
        limit = numbers[1].number_input("Records per turn", value=injection.get("limit", 20), step=1,
                                        key=f"keys_inj_limit_{v}", help="At most this many records about the "
                                                                        "person and the organisation together.")
        with numbers[1]:
            _error_at(MEMORY_ERROR, "memory.injection.limit", doing=doing)
        budget = numbers[2].number_input("Token budget", value=injection.get("budget_tokens", 1500), step=100,
                                         key=f"keys_inj_budget_{v}", help="The most tokens the block may use.")
        with numbers[2]:
            _error_at(MEMORY_ERROR, "memory.injection.budget_tokens", doing=doing)
        metadata_rows = components.pairs_editor(
            "Only records with this metadata", shapes.pairs_frame(injection.get("metadata")),
            key=f"keys_inj_metadata_{v}", help="Every name must hold this value on a record for it to be injected.")
        _error_at(MEMORY_ERROR, "memory.injection.metadata", doing=doing)
        st.markdown("**Decay** — half-lives in days per record type, instead of the organisation's",
                    help="A record's confidence halves every this many days since it was last written.")
        decay_rows = st.data_editor(key_admin.decay_frame(memory).to_pandas(), num_rows="dynamic", hide_index=True,
                                    key=f"keys_decay_{v}", column_config={
                                        "type": st.column_config.TextColumn("type"),
                                        "half_life_days": st.column_config.NumberColumn("half-life (days)")})
        _error_at(MEMORY_ERROR, "memory.decay", doing=doing)
        save = st.form_submit_button("Save memory configuration", key=f"keys_memory_save_{key.id}", type="primary",
                                     icon=":material/save:")
    err: ApiError | None = st.session_state.get(MEMORY_ERROR)
    if err is not None and not (err.param or "").startswith("memory."):
        components.api_error(err, doing)
    components.raw_json(memory, "The memory configuration as JSON")
    if not save:
        return
    st.session_state.pop(MEMORY_ERROR, None)
    try:
        body = key_admin.memory_body(
            retrieval_tool=retrieval, write_tool=write, inject=inject, index_id=index_id, enabled=enabled,
            types=list(types), metadata=shapes.pairs_value(metadata_rows, "metadata"),
            min_confidence=min_confidence, limit=int(limit) if limit is not None else None,
            budget_tokens=int(budget) if budget is not None else None,
            decay_rows=[dict(r) for r in decay_rows.to_dict("records")])
        key_admin.update_key(client, org, key.id, {"memory": body})
    except ValueError as exc:
        st.session_state[MEMORY_ERROR] = ApiError(0, "invalid_value", str(exc))
        st.rerun()
    except ApiError as failed:
        st.session_state[MEMORY_ERROR] = failed
        st.rerun()
    _saved(f"Saved the memory configuration of {key.name}.")


def _rules_table(policy: dict[str, Any], bad_rule: int | None, key_id: str) -> None:
    rules = key_admin.rules_frame(policy)
    if rules.is_empty():
        st.caption("No rules: this key reaches nothing its organisation's policy does not permit.")
        return

    def highlight(row: Any) -> list[str]:
        colour = "background-color: rgba(255, 75, 75, 0.25)" if row.name == bad_rule else ""
        return [colour] * len(row)

    st.dataframe(rules.to_pandas().style.apply(highlight, axis=1), hide_index=True, key=f"keys_rules_{key_id}",
                 column_config={"id": st.column_config.TextColumn("rule"),
                                "effect": st.column_config.TextColumn("effect", width="small"),
                                "kind": st.column_config.TextColumn("applies to", width="small"),
                                "actions": st.column_config.TextColumn("actions"),
                                "match": st.column_config.TextColumn("labels"),
                                "when": st.column_config.TextColumn("when")})


def policy_editor(client: CoreClient, org: str, key: KeyOut) -> None:
    err: ApiError | None = st.session_state.get(POLICY_ERROR)
    policy = key.policy or {}
    st.markdown("**Rules** — a request may do an action when a permit rule matches and no deny rule does")
    _rules_table(policy, key_admin.rule_index(err.param if err else None), key.id)
    indexes = policy.get("indexes")
    st.markdown(f"**Indexes:** {'every index' if indexes == ['*'] else ', '.join(map(str, indexes or [])) or 'none'}")
    settings = policy.get("settings") or {}
    if settings:
        components.fields_table(shapes.fields_frame(settings), key=f"keys_policy_settings_{key.id}")
    v = f"{key.id}_{key.updated_at.timestamp()}"
    with st.form(f"keys_policy_form_{key.id}", border=False):
        text = st.text_area("Policy document", json.dumps(policy, indent=2, ensure_ascii=False), height=320,
                            key=f"keys_policy_text_{v}",
                            help="`indexes` the key reaches, its `rules` and `settings`; saving replaces the whole "
                                 "document.")
        if err is not None:
            where = f"At `{err.param}`: " if err.param else ""
            st.error(f"{where}{err.message}\n\nCode `{err.code}`", icon=":material/error:")
        save = st.form_submit_button("Save policy", key=f"keys_policy_save_{key.id}", type="primary",
                                     icon=":material/save:")
    if not save:
        return
    st.session_state.pop(POLICY_ERROR, None)
    try:
        key_admin.update_key(client, org, key.id, {"policy": key_admin.policy_document(text)})
    except ValueError as exc:
        st.session_state[POLICY_ERROR] = ApiError(0, "invalid_json", str(exc), "policy")
        st.rerun()
    except ApiError as failed:
        st.session_state[POLICY_ERROR] = failed
        st.rerun()
    _saved(f"Saved the policy of {key.name}.")


def trail(entries: pl.DataFrame, raw: list[Any], key_id: str) -> None:
    """The key's audit trail; a selected entry shows what it changed and the key as it was then."""
    state = st.dataframe(entries, hide_index=True, key=f"keys_trail_{key_id}", on_select="rerun",
                         selection_mode="single-row", column_config={
                             "at": st.column_config.DatetimeColumn("at", format="YYYY-MM-DD HH:mm:ss"),
                             "action": st.column_config.TextColumn("action", width="small"),
                             "by": st.column_config.TextColumn("by"),
                             "changed": st.column_config.TextColumn("what changed", width="large"),
                             "id": None})
    rows = state.selection.rows if state is not None else []
    if not rows or rows[0] >= len(raw):
        st.caption("Select an entry to see what it changed and the key as it was then.")
        return
    n = rows[0]
    before = raw[n + 1].snapshot if n + 1 < len(raw) else {}
    changes = shapes.changes_frame(before, raw[n].snapshot)
    st.markdown("**What changed**")
    st.dataframe(changes, hide_index=True, key=f"keys_trail_changes_{key_id}")
    components.raw_json(raw[n].snapshot, "The key as it was then (JSON)")
