"""Small helpers shared by tests that watch other threads or processes, or drive a browser."""

import os
import pwd
import shutil
import socket
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.contrib.auth.hashers import PBKDF2PasswordHasher


def wait_for(condition, *, timeout: float = 10.0, interval: float = 0.02, what: str = "condition"):
    """Poll ``condition()`` until it returns something truthy; return it, or fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def unprivileged_user(server_host: str | None) -> str:
    """Who a server process runs as when the tests run as root: the owner of the database server's
    socket directory if it listens on one (the embedded server's is private to its user), else
    nobody."""
    if server_host and server_host.startswith("/"):
        owner = pwd.getpwuid(Path(server_host).stat().st_uid).pw_name
        if owner != "root":
            return owner
    return "nobody"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def asgi_get(path: str, *, token: str, **headers) -> tuple[int, dict, bytes]:
    """GET through Django's ASGI test client (a streaming response read to its end): (status, headers, body)."""
    return asgi_request("get", path, token=token, **headers)


def asgi_request(
    method: str,
    path: str,
    *,
    token: str | None,
    data=None,
    raw: bytes | None = None,
    enforce_csrf_checks: bool = False,
    **headers,
) -> tuple[int, dict, bytes]:
    """A request through Django's ASGI test client: any method, a JSON body (``data``; text as it
    is) or raw bytes (``raw``); a streaming response is read to its end. Returns (status, headers, body)."""
    import json

    from asgiref.sync import async_to_sync
    from django.test import AsyncClient

    auth = {"Authorization": f"Bearer {token}"} if token else {}
    if raw is not None:
        payload = raw
    else:  # text is sent as it is (as Django's test client sends it), anything else as JSON
        payload = data if isinstance(data, str) else (json.dumps(data) if data is not None else "")

    async def call():
        client = AsyncClient(enforce_csrf_checks=enforce_csrf_checks)
        kwargs = {"content_type": "application/json"} if payload else {}
        response = await client.generic(method.upper(), path, data=payload, headers={**auth, **headers}, **kwargs)
        if response.streaming:
            body = b"".join([chunk async for chunk in response.streaming_content])
        else:
            body = response.content
        return response.status_code, dict(response.headers), body

    return async_to_sync(call)()


def off_loop(fn, *args, **kwargs):
    """``fn(...)`` in a thread of its own, its database connections closed after: for ORM work in
    a test whose thread runs an event loop (Playwright's sync API), where Django refuses it."""
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connections

    def call():
        try:
            return fn(*args, **kwargs)
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(call).result()


CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
needs_chromium = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium")


@contextmanager
def chromium():
    """Debian's headless Chromium, driven by Playwright, closed on leaving. Start it after the
    fixtures that use the ORM: Playwright's sync API runs an event loop in this thread, where
    Django would refuse (or keep apart) database work."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield browser
        finally:
            browser.close()


def logged_in_page(browser, base_url: str, *, username: str, password: str, next_path: str = "", **context):
    """A new page at 1400×900 (``context`` may change it: color_scheme, java_script_enabled, ...),
    logged in through the admin's login form."""
    page = browser.new_context(**{"viewport": {"width": 1400, "height": 900}, **context}).new_page()
    page.goto(f"{base_url}/admin/login/{f'?next={next_path}' if next_path else ''}")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("input[type=submit]")
    return page


@contextmanager
def capturing(aliases=("default", "pipeline")):
    """Every statement the databases run inside the block, appended to the list it gives:
    ``(alias, sql, params)``."""
    from django.db import connections

    statements, wrappers = [], []

    def wrapper_for(alias):
        def wrapper(execute, sql, params, many, context):
            statements.append((alias, sql, params))
            return execute(sql, params, many, context)

        return wrapper

    try:
        for alias in aliases:
            wrappers.append(connections[alias].execute_wrapper(wrapper_for(alias)))
            wrappers[-1].__enter__()
        yield statements
    finally:
        for installed in reversed(wrappers):
            installed.__exit__(None, None, None)


def operator_page(browser, base_url: str, path: str, **context):
    """``path`` in a new page, logged in as the browser tests' superuser operator (secret-pw)."""
    page = logged_in_page(browser, base_url, username="operator", password="secret-pw", **context)
    page.goto(f"{base_url}{path}")
    return page


def screenshot_for_the_manual(page, name: str, *, full_page: bool = False) -> None:
    """``page`` as docs/``name``, the manual's picture, when UPDATE_SCREENSHOTS is set
    (``UPDATE_SCREENSHOTS=1 make test`` retakes them all)."""
    if os.environ.get("UPDATE_SCREENSHOTS"):
        page.screenshot(path=str(Path(__file__).resolve().parents[1] / "docs" / name), full_page=full_page)


class QuickPBKDF2PasswordHasher(PBKDF2PasswordHasher):
    """Django's default hasher at 1,000 iterations instead of over a million (0.4 s a password):
    the suite's users get hashes that any server of the project verifies (the count is in the hash)."""

    iterations = 1000


def every_scope_token(name: str) -> str:
    """The key of a token with every scope (read, write, operate): the whole API."""
    from pipeline_project.core import services
    from pipeline_project.core.models import SCOPES

    _token, key = services.api_token_create(name=name, scopes=list(SCOPES))
    return key


def scoped_client(*scopes: str):
    """An API client authenticated with a new token of just these scopes."""
    from rest_framework.test import APIClient

    from pipeline_project.core import services

    _token, key = services.api_token_create(name=f"daemon-{'-'.join(scopes)}", scopes=list(scopes))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


def staff_client(*permissions: str, client=None):
    """A client logged in as a new staff member holding ``permissions`` ("app_label.codename");
    an APIClient unless ``client`` is given (the admin's test client)."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission
    from rest_framework.test import APIClient

    user = get_user_model().objects.create_user(f"staff-{get_user_model().objects.count()}", is_staff=True)
    for permission in permissions:
        app_label, codename = permission.split(".")
        user.user_permissions.add(Permission.objects.get(content_type__app_label=app_label, codename=codename))
    client = client or APIClient()
    client.force_login(user)
    return client
