"""What names an MCP caller: the headers a REST request would carry, from the HTTP request or, for stdio, from
the environment the process was started with. Nothing here imports the SDK, so the command checks it at once."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from backend.access.principal import ORG_HEADER
from backend.access.subjects import SUBJECT_HEADER

KEY_ENV = "CORE_MCP_KEY"
SUBJECT_ENV = "CORE_MCP_SUBJECT"


class MissingCredential(ValueError):
    pass


@dataclass(frozen=True)
class Credential:
    authorization: str | None
    subject_header: str | None = None
    org_header: str | None = None

    @classmethod
    def of_headers(cls, headers: Any) -> Credential:
        return cls(headers.get("authorization"), headers.get(SUBJECT_HEADER), headers.get(ORG_HEADER))


def credential_from_env(env: Mapping[str, str]) -> Credential:
    """`CORE_MCP_KEY` is a key's secret or a subject token; `CORE_MCP_SUBJECT` names the person as the
    `X-Core-Subject` header does (JSON, with attributes), or as a bare id."""
    key = (env.get(KEY_ENV) or "").strip()
    if not key:
        raise MissingCredential(f"Set {KEY_ENV} to a key's secret (ck_…) or a subject token (cst_…).")
    subject = (env.get(SUBJECT_ENV) or "").strip() or None
    if subject is not None and not subject.startswith("{"):
        subject = json.dumps({"id": subject})
    return Credential(f"Bearer {key}", subject)
