"""The dashboard's tables of JSON documents and its key/value editors (DSH-3, DSH-4, DSH-8): what an administrator
reads and edits reads back to the value it came from."""

from __future__ import annotations

from typing import Any

import pytest

from dashboard.data import shapes


def test_dsh_8_documents_flatten_to_dotted_paths_and_changes_name_the_fields() -> None:
    policy = {"indexes": ["*"], "rules": [{"id": "own", "when": [{"atom": "subject_is_owner"}]}], "settings": {}}
    assert shapes.flatten(policy) == [("indexes", ["*"]), ("rules[0].id", "own"),
                                      ("rules[0].when[0].atom", "subject_is_owner"), ("settings", {})]
    frame = shapes.fields_frame({"a": {"b": 1, "c": None}, "d": "text"})
    assert frame.rows() == [("a.b", "1"), ("a.c", ""), ("d", "text")]
    changes = shapes.changes_frame({"capabilities": ["memory"], "name": "x", "memory": {"write_tool": False}},
                                   {"capabilities": ["memory", "threads"], "name": "x",
                                    "memory": {"write_tool": True}})
    assert changes.rows() == [("capabilities", '["memory"]', '["memory", "threads"]'),
                              ("memory.write_tool", "false", "true")]
    before_after, rest = shapes.detail_frames({"before": {"n": 1}, "after": {"n": 2}, "route": "PATCH"})
    assert before_after.rows() == [("n", "1", "2")] and rest.rows() == [("route", "PATCH")]
    only, rest = shapes.detail_frames({"count": 3})
    assert only.is_empty() and rest.rows() == [("count", "3")]


@pytest.mark.parametrize("value", [
    {"team": "support", "n": 5, "ok": True, "list": ["a", "b"], "nested": {"x": 1}},
    {"looks_like_a_number": "5", "looks_like_json": "true", "quoted": '"x"', "empty": ""},
])
def test_dsh_3_key_value_rows_read_back_to_the_same_mapping(value: dict[str, Any]) -> None:
    rows = shapes.pairs_frame(value).to_dicts()
    assert shapes.pairs_value(rows, "metadata") == value


def test_dsh_3_key_value_rows_are_refused_in_words() -> None:
    with pytest.raises(ValueError, match="has no name"):
        shapes.pairs_value([{"name": "", "value": "x"}], "metadata")
    with pytest.raises(ValueError, match="given twice"):
        shapes.pairs_value([{"name": "a", "value": "1"}, {"name": "a", "value": "2"}], "label")
    assert shapes.pairs_value([{"name": None, "value": None}, {"name": " a ", "value": "plain text"}], "x") == {
        "a": "plain text"}
    assert shapes.attributes_value([{"name": "department", "value": "payroll, hr"}, {"name": "", "value": ""}]) == {
        "department": ["payroll", "hr"]}
    with pytest.raises(ValueError, match="given twice"):
        shapes.attributes_value([{"name": "a", "value": "x"}, {"name": "a", "value": "y"}])
