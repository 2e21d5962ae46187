"""Compaction (TRN-6): counting turns, planning summaries, the history a turn sends, and the summary job's work.

A turn calls `history(...)` for what to send of its thread and `schedule(...)` after it commits; the job in
backend/jobs/compaction.py writes the summaries with `summaries.next_summary/ask_model/store_summary`.
"""

from backend.domains.compaction.history import History, history
from backend.domains.compaction.service import schedule
from backend.domains.compaction.settings import CompactionSettings

__all__ = ["CompactionSettings", "History", "history", "schedule"]
