"""Extraction (04-extraction.md EXT-2 … EXT-11): memory written from the organisation's own conversations.

`switch` holds the per-store switch and its reports; `planning` cuts quiet threads into windows; `reading`
reads one window in three steps (a short read transaction, the model call with none open, the records and the
window's `ready` mark committed together); `queue` names the jobs and queues them in the caller's transaction.
"""
