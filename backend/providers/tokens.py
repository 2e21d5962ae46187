"""Token estimation for injection budgets (INJ-10): one pluggable estimator, chosen by name."""

from __future__ import annotations

from collections.abc import Callable

TokenEstimator = Callable[[str], int]


def utf8_bytes_over_four(line: str) -> int:
    """Default: the line's UTF-8 bytes plus its newline, divided by four, rounded up.

    Cheap, deterministic and tokenizer-free; it overestimates English slightly and is close for code and
    non-Latin scripts, which is the safe side for a budget.
    """
    return -(-(len(line.encode("utf-8")) + 1) // 4)


ESTIMATORS: dict[str, TokenEstimator] = {"utf8_bytes_over_four": utf8_bytes_over_four}
DEFAULT_ESTIMATOR = "utf8_bytes_over_four"


def get_estimator(name: str = DEFAULT_ESTIMATOR) -> TokenEstimator:
    try:
        return ESTIMATORS[name]
    except KeyError:
        raise ValueError(f"unknown token estimator {name!r}; known: {', '.join(sorted(ESTIMATORS))}") from None
