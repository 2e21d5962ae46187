"""TRN-10/EXT-11: placeholders stable within a thread, restoring what a model wrote, hiding JSON, the person's
own attributes, and plugging another detector."""

from __future__ import annotations

import pytest

from backend.config import settings_from_env
from backend.providers.pii import (
    DefaultDetector,
    KnownValue,
    PiiUnavailable,
    Pseudonym,
    Pseudonymizer,
    known_from_attributes,
    load_detector,
)

DETECTOR = DefaultDetector()


def test_trn_10_same_value_same_placeholder_across_turns_and_a_new_value_the_next_number() -> None:
    first = Pseudonymizer(DETECTOR, subject="anna")
    assert first.hide("Mail Bert Jansen at bert@example.com or bert@example.com.") == \
        "Mail <PERSON_1> at <EMAIL_1> or <EMAIL_1>."
    # The next turn starts from the stored mapping (here: what the first turn added).
    second = Pseudonymizer(DETECTOR, first.entries, subject="anna")
    assert second.hide("Bert Jansen and Emma Thompson; also emma@example.com.") == \
        "<PERSON_1> and <PERSON_2>; also <EMAIL_2>."
    assert [(e.placeholder, e.value) for e in second.new_entries()] == [
        ("<PERSON_2>", "Emma Thompson"), ("<EMAIL_2>", "emma@example.com")]
    # A value the thread maps is hidden wherever it appears, even where the detector would not find it.
    assert second.hide("BERT JANSEN signed.") == "<PERSON_3> signed."  # another spelling is another value
    assert second.hide("Ask bert@example.com.") == "Ask <EMAIL_1>."


def test_trn_10_numbering_continues_above_the_highest_stored_number_per_kind() -> None:
    stored = [Pseudonym("<PERSON_1>", "PERSON", "Anna de Vries"), Pseudonym("<PERSON_7>", "PERSON", "Bert Jansen"),
              Pseudonym("<URL_2>", "URL", "https://example.com")]
    pz = Pseudonymizer(DETECTOR, stored)
    assert pz.hide("Emma Thompson, https://example.org, 06-12345678") == "<PERSON_8>, <URL_3>, <PHONE_1>"


def test_trn_10_restore_accepts_the_spellings_models_use() -> None:
    pz = Pseudonymizer(DETECTOR, [Pseudonym("<PERSON_1>", "PERSON", "Anna de Vries"),
                                  Pseudonym("<EMAIL_1>", "EMAIL", "anna@example.com"),
                                  Pseudonym("<PERSON_12>", "PERSON", "Bert Jansen")])
    cases = {
        "Dear <PERSON_1>,": "Dear Anna de Vries,",
        "Dear PERSON_1,": "Dear Anna de Vries,",
        "[PERSON_1] and {PERSON_12} and {{ PERSON_1 }}": "Anna de Vries and Bert Jansen and Anna de Vries",
        "<person_1> or < PERSON-1 > or [Person 12] or <<EMAIL1>>": "Anna de Vries or Anna de Vries or Bert Jansen "
                                                                   "or anna@example.com",
        "&lt;EMAIL_1&gt;": "anna@example.com",
        "PERSON_12's file, PERSON_1.": "Bert Jansen's file, Anna de Vries.",
        # not placeholders, or not this thread's: left as written
        "<PERSON_9>, PERSON_1x, xPERSON_1, person_1, (PERSON 1), <PHONE_1>": "<PERSON_9>, PERSON_1x, xPERSON_1, "
                                                                            "person_1, (PERSON 1), <PHONE_1>",
        # brackets around an exact placeholder are the text's own
        "<<EMAIL_1>>": "<anna@example.com>",
        "[<PERSON_1>]": "[Anna de Vries]",
    }
    assert {text: pz.restore(text) for text in cases} == cases


def test_trn_10_hide_json_and_restore_json_walk_strings_and_keep_keys() -> None:
    pz = Pseudonymizer(DETECTOR, subject="anna")
    arguments = {"type": "fact", "text": "Emma Thompson lives at 10 Downing Street", "metadata": {
        "contact": ["emma@example.com", 3, None, True], "Emma Thompson": "emma@example.com"}}
    hidden = pz.hide_json(arguments)
    assert hidden == {"type": "fact", "text": "<PERSON_1> lives at <ADDRESS_1>", "metadata": {
        "contact": ["<EMAIL_1>", 3, None, True], "Emma Thompson": "<EMAIL_1>"}}
    assert pz.restore_json(hidden) == arguments
    assert pz.restore_json({"q": "PERSON_1", "n": [1.5, "[EMAIL_1]"]}) == {"q": "Emma Thompson",
                                                                          "n": [1.5, "emma@example.com"]}


def test_trn_10_her_attributes_are_hidden_as_written_and_attributed_to_her() -> None:
    known = known_from_attributes({"name": ["Mark de Wit"], "E-Mail": ["mark@wit.nl"], "department": ["payroll"]},
                                  "mark")
    assert known == [KnownValue("PERSON", "Mark de Wit", "mark"), KnownValue("PERSON", "Mark", "mark"),
                     KnownValue("PERSON", "de Wit", "mark"), KnownValue("EMAIL", "mark@wit.nl", "mark")]
    pz = Pseudonymizer(DETECTOR, known=known, subject="bert")
    hidden = pz.hide("Mark said: please mark the date with De Wit and MARK DE WIT (Mark@Wit.nl), payroll.")
    # "mark" the verb is not her name; her name in capitals is, and so is her address in any case.
    assert hidden == "<PERSON_1> said: please mark the date with <PERSON_2> and <PERSON_3> (<EMAIL_1>), payroll."
    assert [(e.value, e.subject, e.belongs_to) for e in pz.new_entries()] == [
        ("Mark", "bert", "mark"), ("De Wit", "bert", "mark"), ("MARK DE WIT", "bert", "mark"),
        ("Mark@Wit.nl", "bert", "mark")]


def test_trn_10_the_writer_of_a_text_is_named_per_call() -> None:
    pz = Pseudonymizer(DETECTOR, subject="anna")
    pz.hide("Call 06-12345678.")
    pz.hide("Mine is 06-87654321.", subject="bert")
    pz.hide("The organisation's is +31 20 123 4567.", subject=None)
    assert [(e.placeholder, e.subject, e.belongs_to) for e in pz.new_entries()] == [
        ("<PHONE_1>", "anna", None), ("<PHONE_2>", "bert", None), ("<PHONE_3>", None, None)]


def test_trn_10_adopting_stored_placeholders_renumbers_and_says_so() -> None:
    pz = Pseudonymizer(DETECTOR, [Pseudonym("<PERSON_1>", "PERSON", "Anna de Vries")])
    assert pz.hide("Carl Peters and Bert Jansen") == "<PERSON_2> and <PERSON_3>"
    # Another turn stored Bert Jansen as PERSON_2 first; Carl Peters moved to PERSON_4.
    changed = pz.adopt([Pseudonym("<PERSON_4>", "PERSON", "Carl Peters"),
                        Pseudonym("<PERSON_2>", "PERSON", "Bert Jansen")])
    assert changed and pz.new_entries() == []
    assert pz.hide("Carl Peters and Bert Jansen") == "<PERSON_4> and <PERSON_2>"
    assert pz.restore("<PERSON_4>, <PERSON_2>, <PERSON_3>") == "Carl Peters, Bert Jansen, <PERSON_3>"
    assert not pz.adopt([])


def test_trn_10_an_operator_plugs_a_detector_by_class_path() -> None:
    settings = settings_from_env({"CORE_SECRET": "s" * 32, "CORE_PII_DETECTOR": "tests.pii.plugins:EmployeeNumbers"})
    pz = Pseudonymizer(load_detector(settings.pii_detector))
    assert pz.hide("EMP-00417 is Emma Thompson.") == "<EMPLOYEE_1> is <PERSON_1>."
    assert pz.restore("[EMPLOYEE_1]") == "EMP-00417"
    assert type(load_detector("tests.pii.plugins.EmployeeNumbers")).__name__ == "EmployeeNumbers"
    assert settings_from_env({"CORE_SECRET": "s" * 32}).pii_detector == "backend.providers.pii.detector:DefaultDetector"


@pytest.mark.parametrize("path", ["tests.pii.plugins:Missing", "tests.pii.nowhere:Detector",
                                  "tests.pii.plugins:NoDetectMethod"])
def test_ext_11_a_detector_that_cannot_be_loaded_is_pii_unavailable(path: str) -> None:
    with pytest.raises(PiiUnavailable) as raised:
        load_detector(path)
    assert raised.value.code == "pii_unavailable"


@pytest.mark.parametrize("path", ["tests.pii.plugins:Broken", "tests.pii.plugins:OutOfBounds"])
def test_ext_11_a_detector_that_fails_or_answers_nonsense_hides_nothing_and_sends_nothing(path: str) -> None:
    pz = Pseudonymizer(load_detector(path))
    with pytest.raises(PiiUnavailable):
        pz.hide("Emma Thompson")
    assert pz.new_entries() == []
