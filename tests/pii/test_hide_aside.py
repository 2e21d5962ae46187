"""TRN-10: a turn of a pseudonymising key hides the whole conversation before the model sees it. Hiding is linear
in the text, but a long conversation still takes seconds (1 MiB: about 2.7 s), and on the event loop that stalled
every other request meanwhile. It runs in a worker thread (`hide_messages_aside`) and gives what `hide_messages`
gives."""

from __future__ import annotations

from typing import Any

from backend.domains.privacy.messages import hide_messages, hide_messages_aside, hide_texts_aside
from backend.providers.pii import DefaultDetector, Pseudonymizer
from tests.helpers import loop_wakes_during

SENTENCE = "Anna de Vries (anna{0}@example.com, +31 6 1234 {0:04d}) woont aan de Kerkstraat {1}. "
# The loop wakes every millisecond; while a check holds it, it wakes 0 or 1 times. A hide of this size takes a
# few hundred milliseconds, during which a free loop wakes dozens of times even while the hiding thread holds the
# interpreter's lock (it is handed over every 5 ms).
AWAKE = 10


def _conversation() -> list[dict[str, Any]]:
    text = "".join(SENTENCE.format(i, i % 300) for i in range(2500))  # about 220 KB
    return [{"role": "user", "content": text}, {"role": "assistant", "content": "Noted, Anna."}]


def test_trn_10_a_long_conversation_is_hidden_off_the_event_loop_with_the_same_result() -> None:
    hidden, wakes = loop_wakes_during(lambda: hide_messages_aside(Pseudonymizer(DefaultDetector(), [], subject="anna"),
                                                                   _conversation()))
    assert hidden == hide_messages(Pseudonymizer(DefaultDetector(), [], subject="anna"), _conversation())
    assert "anna7@example.com" not in hidden[0]["content"] and "<EMAIL_8>" in hidden[0]["content"]
    assert wakes >= AWAKE, wakes


def test_trn_10_ext_11_texts_are_hidden_off_the_event_loop_with_the_same_result() -> None:
    """A search tool's output in a turn, a window's lines in extraction: the same worker thread, text by text."""
    texts = [_conversation()[0]["content"], "Noted, Anna.", ""]
    hidden, wakes = loop_wakes_during(lambda: hide_texts_aside(Pseudonymizer(DefaultDetector(), [], subject="anna"),
                                                                texts))
    alone = Pseudonymizer(DefaultDetector(), [], subject="anna")
    assert hidden == [alone.hide(text) for text in texts]
    assert "anna7@example.com" not in hidden[0] and "<EMAIL_8>" in hidden[0]
    assert wakes >= AWAKE, wakes
