"""Promotion proposals (EXT-15): shared records the analysis proposes from people's own records, and what an
administrator or a management key does with them (apply, dismiss). The analysis runs in the maintenance pass."""
