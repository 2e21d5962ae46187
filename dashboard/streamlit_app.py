"""The coremem administrator dashboard: login, the organisation an operator works on, and the pages (DSH-1).

Run with `coremem dashboard` (or `coremem run`); the API's address comes from CORE_API_URL.
"""

from __future__ import annotations

import streamlit as st

from dashboard import components, data, navigation
from shared.client import ApiError

st.set_page_config(page_title="coremem dashboard", page_icon=":material/neurology:", layout="wide")


def login_view() -> None:
    _, middle, _ = st.columns([1, 2, 1])
    with middle:
        st.title("coremem")
        st.caption("Administrator dashboard. Log in with the e-mail address and password of an administrator.")
        notice = st.session_state.pop(data.NOTICE, None)
        if notice:
            st.info(notice, icon=":material/logout:")
        with st.form("login"):
            email = st.text_input("E-mail", key="login_email", autocomplete="username")
            password = st.text_input("Password", type="password", key="login_password",
                                     autocomplete="current-password")
            submitted = st.form_submit_button("Log in", key="login_submit", type="primary", icon=":material/login:")
        st.caption(f"API: {data.api_url()}")
        if not submitted:
            return
        if not email.strip() or not password:
            st.error("Enter your e-mail address and your password.", icon=":material/error:")
            return
        try:
            data.log_in(email.strip(), password)
        except ApiError as err:
            components.api_error(err, "log in")
            return
    st.rerun()


def choose_org_view() -> None:
    components.page_header("Choose an organisation",
                           "You are an operator: pick the organisation to work on in the sidebar.")


def _picked_org() -> None:
    data.choose_org(st.session_state.get("org_choice"))


def org_picker() -> None:
    """An operator works on one organisation at a time; every call then names it (X-Core-Org)."""
    orgs = data.organisations(data.client())
    if orgs.is_empty():
        st.caption("No organisations yet — create one with `coremem bootstrap`.")
        return
    ids = orgs["id"].to_list()
    names = data.names(orgs)
    current = data.org_id()
    st.session_state["org_choice"] = current if current in ids else None
    st.selectbox("Organisation", ids, key="org_choice", format_func=lambda i: f"{names[i]} · {i}",
                 on_change=_picked_org, placeholder="choose one")


def sidebar() -> None:
    admin = data.admin()
    with st.sidebar:
        st.text(admin.email)
        st.caption("operator (every organisation)" if admin.role == "operator" else "administrator")
        if admin.role == "operator":
            org_picker()
        left, right = st.columns(2)
        if left.button("Refresh", key="refresh", icon=":material/refresh:", help="Ask the API again"):
            data.refresh()
        if right.button("Log out", key="logout", icon=":material/logout:"):
            data.log_out("You are logged out.")
            st.rerun()


# The pages are tables first: less empty margin beside them than Streamlit's default.
PAGE_STYLE = "<style>[data-testid='stMainBlockContainer'] {padding-left: 2rem; padding-right: 2rem;}</style>"


def main() -> None:
    st.html(PAGE_STYLE)
    if not data.signed_in():
        st.navigation([st.Page(login_view, title="Log in", icon=":material/login:", url_path="login")],
                      position="hidden").run()
        return
    try:
        sidebar()
        if data.org_id() is None:
            st.navigation([st.Page(choose_org_view, title="Choose an organisation", url_path="choose")],
                          position="hidden").run()
            return
        sections = {name: [st.Page(p.path, title=p.title, icon=p.icon, url_path=p.url_path) for p in pages]
                    for name, pages in navigation.SECTIONS.items() if pages}
        st.navigation(sections).run()
    except ApiError as err:
        if err.status == 401:
            data.log_out(f"Your session ended: {err.message} (code `{err.code}`). Log in again.")
            st.rerun()
        components.api_error(err)


main()
