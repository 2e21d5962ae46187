"""The dashboard's page registry: every page the sidebar offers, grouped by section.

This list is the one place a page registers. The browser test opens every page named here and the
AppTest suite checks that each one has a test, so a new page is covered as soon as it is listed.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PageSpec:
    path: str  # relative to dashboard/streamlit_app.py
    title: str
    icon: str
    url_path: str
    spec_id: str


PLATFORM: list[PageSpec] = [
    PageSpec("app_pages/overview.py", "Overview", ":material/dashboard:", "overview", "DSH-2"),
    PageSpec("app_pages/indexes.py", "Indexes", ":material/folder_open:", "indexes", "PLT-13"),
    PageSpec("app_pages/keys.py", "Keys", ":material/key:", "keys", "PLT-4"),
    PageSpec("app_pages/people.py", "People", ":material/person_search:", "people", "MEM-19"),
    PageSpec("app_pages/audit_log.py", "Audit log", ":material/policy:", "audit", "DSH-8"),
]

# MEMORY PAGES REGISTER HERE once their API exists: records (DSH-3), stores (DSH-4), extraction health
# (DSH-5), injection previewer (DSH-6), threads (DSH-7), proposals (DSH-9), export (DSH-10). Add a
# PageSpec per page file in dashboard/app_pages/ to this list (and a section to SECTIONS below).
MEMORY: list[PageSpec] = [
    PageSpec("app_pages/records.py", "Records", ":material/database:", "records", "DSH-3"),
    PageSpec("app_pages/stores.py", "Stores", ":material/tune:", "stores", "DSH-4"),
    PageSpec("app_pages/extraction.py", "Extraction health", ":material/monitor_heart:", "extraction", "DSH-5"),
    PageSpec("app_pages/previewer.py", "Injection previewer", ":material/preview:", "previewer", "DSH-6"),
    PageSpec("app_pages/threads.py", "Threads", ":material/forum:", "threads", "DSH-7"),
    PageSpec("app_pages/proposals.py", "Proposals", ":material/merge_type:", "proposals", "DSH-9"),
]

SECTIONS: dict[str, list[PageSpec]] = {
    "Platform": PLATFORM,
    "Memory": MEMORY,
}


def all_pages() -> list[PageSpec]:
    """Every registered page, in sidebar order (the first one is the landing page)."""
    return [page for pages in SECTIONS.values() for page in pages]
