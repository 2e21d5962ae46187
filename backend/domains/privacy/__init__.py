"""Pseudonymisation's storage (TRN-10, EXT-11): per-thread placeholders, the thread mark, erasure (MEM-19)."""
