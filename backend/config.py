"""Deployment settings, read once from CORE_* environment variables."""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path


def _bool(value: str | None, default: bool = False) -> bool:
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def _load_or_create_secret(data_dir: Path) -> str:
    # A newcomer gets a stable secret kept beside the embedded database; production sets CORE_SECRET.
    path = data_dir / "secret"
    if path.exists():
        return path.read_text().strip()
    data_dir.mkdir(parents=True, exist_ok=True)
    value = secrets.token_urlsafe(48)
    path.write_text(value)
    path.chmod(0o600)
    return value


@dataclass(frozen=True)
class Settings:
    database_url: str | None = None
    data_dir: Path = field(default_factory=lambda: Path(".coremem"))
    secret: str = ""
    max_body_bytes: int = 1024 * 1024
    admin_token_ttl_seconds: int = 8 * 3600
    subject_token_max_ttl_seconds: int = 24 * 3600
    key_audit_retention_days: int = 400
    threads_group_reach_by_rule: bool = False
    working_state_max_bytes: int = 16 * 1024
    injection_max_budget_tokens: int = 8000
    pii_detector: str = "backend.providers.pii.detector:DefaultDetector"  # TRN-10: module:Class of the detector
    log_level: str = "INFO"
    access_log: bool = False  # a log line per request costs a tenth of a fast request; on for debugging
    model_timeout_seconds: float = 60.0
    model_max_retries: int = 2
    turn_max_tool_rounds: int = 8
    extraction_window_messages: int = 40  # EXT-8: at most this many messages per window
    extraction_window_tokens: int = 6000  # EXT-8: and at most about this many tokens
    rate_limit_per_second: float = 0.0  # per key and process; 0: no limit
    rate_limit_burst: int = 0  # the bucket's size; 0: one second's worth (at least 1)
    jobs_stalled_seconds: float = 60.0  # a job whose worker sent no heartbeat this long is queued again
    recall_flush_seconds: float = 1.0  # INJ-8: turns' recall counts are written together this often

    def with_overrides(self, **changes: object) -> Settings:
        return replace(self, **changes)  # type: ignore[arg-type]


def settings_from_env(env: dict[str, str] | None = None) -> Settings:
    env = dict(os.environ) if env is None else env
    data_dir = Path(env.get("CORE_DATA_DIR", ".coremem"))
    secret = env.get("CORE_SECRET") or _load_or_create_secret(data_dir)
    return Settings(
        database_url=env.get("CORE_DATABASE_URL") or None,
        data_dir=data_dir,
        secret=secret,
        max_body_bytes=int(env.get("CORE_MAX_BODY_BYTES", str(1024 * 1024))),
        admin_token_ttl_seconds=int(env.get("CORE_ADMIN_TOKEN_TTL_SECONDS", str(8 * 3600))),
        subject_token_max_ttl_seconds=int(env.get("CORE_SUBJECT_TOKEN_MAX_TTL_SECONDS", str(24 * 3600))),
        key_audit_retention_days=int(env.get("CORE_KEY_AUDIT_RETENTION_DAYS", "400")),
        threads_group_reach_by_rule=_bool(env.get("CORE_THREADS_GROUP_REACH_BY_RULE")),
        working_state_max_bytes=int(env.get("CORE_WORKING_STATE_MAX_BYTES", str(16 * 1024))),
        injection_max_budget_tokens=int(env.get("CORE_INJECTION_MAX_BUDGET_TOKENS", "8000")),
        pii_detector=env.get("CORE_PII_DETECTOR") or Settings.pii_detector,
        log_level=env.get("CORE_LOG_LEVEL", "INFO"),
        access_log=_bool(env.get("CORE_ACCESS_LOG")),
        model_timeout_seconds=float(env.get("CORE_MODEL_TIMEOUT_SECONDS", "60")),
        model_max_retries=int(env.get("CORE_MODEL_MAX_RETRIES", "2")),
        turn_max_tool_rounds=int(env.get("CORE_TURN_MAX_TOOL_ROUNDS", "8")),
        extraction_window_messages=int(env.get("CORE_EXTRACTION_WINDOW_MESSAGES", "40")),
        extraction_window_tokens=int(env.get("CORE_EXTRACTION_WINDOW_TOKENS", "6000")),
        rate_limit_per_second=float(env.get("CORE_RATE_LIMIT_PER_SECOND", "0")),
        rate_limit_burst=int(env.get("CORE_RATE_LIMIT_BURST", "0")),
        jobs_stalled_seconds=float(env.get("CORE_JOBS_STALLED_SECONDS", "60")),
        recall_flush_seconds=float(env.get("CORE_RECALL_FLUSH_SECONDS", "1")),
    )


def secret_exists(env: dict[str, str] | None = None) -> bool:
    """Whether a secret is set or kept already (`settings_from_env` would otherwise make a new one)."""
    env = dict(os.environ) if env is None else env
    return bool(env.get("CORE_SECRET")) or (Path(env.get("CORE_DATA_DIR", ".coremem")) / "secret").exists()


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return settings_from_env()
