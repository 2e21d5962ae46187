"""Per-key rate limiting (PLT-14: 429 with `Retry-After`): a token bucket per key, kept in this process.

A key and the subject tokens it minted share one bucket; administrators are not limited (the dashboard's calls
are theirs). Each process keeps its own buckets: with N API processes a key may make up to N times the rate.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable

from backend.access.principal import Principal
from backend.config import Settings
from backend.errors import RateLimited

MAX_BUCKETS = 100_000  # least recently used buckets beyond this are forgotten (a forgotten bucket starts full)


class RateLimiter:
    def __init__(self, per_second: float, burst: int = 0, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = per_second
        self.burst = float(burst) if burst > 0 else max(1.0, per_second)
        self.clock = clock
        self._buckets: OrderedDict[str, list[float]] = OrderedDict()  # key id -> [tokens, when last filled]

    @classmethod
    def from_settings(cls, settings: Settings) -> RateLimiter:
        return cls(settings.rate_limit_per_second, settings.rate_limit_burst)

    @property
    def enabled(self) -> bool:
        return self.rate > 0

    def take(self, principal: Principal) -> None:
        """Spend one token of the caller's key, or raise 429 saying in whole seconds when one is back."""
        if not self.enabled or principal.key is None:
            return
        key_id = str(principal.key["id"])
        now = self.clock()
        bucket = self._buckets.get(key_id)
        if bucket is None:
            bucket = self._buckets[key_id] = [self.burst, now]
            if len(self._buckets) > MAX_BUCKETS:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(key_id)
            bucket[0] = min(self.burst, bucket[0] + (now - bucket[1]) * self.rate)
            bucket[1] = now
        if bucket[0] >= 1:
            bucket[0] -= 1
            return
        wait = max(1, math.ceil((1 - bucket[0]) / self.rate))
        raise RateLimited(f"This key sent more than {self.rate:g} requests a second (bursts up to {self.burst:g}); "
                          f"try again in {wait} s.", retry_after=wait)
