"""Helpers for the notebook tests: a JupyterLab on 127.0.0.1 with throw-away data folders, and
Debian's Chromium driven by Playwright (never a browser Playwright downloads)."""
from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def browser_missing() -> str:
    """Return why the browser test cannot run here ("" when it can)."""
    if not os.path.exists(CHROMIUM):
        return f"Debian's chromium is not installed ({CHROMIUM} missing; .ci/run installs it)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -e '.[dev,all]')"
    return ""


def require_browser() -> None:
    """Skip the calling test, with the reason, when the browser is missing here; under CI
    (``CI=true``) fail it instead: CI must run every browser test."""
    import pytest
    why = browser_missing()
    if not why:
        return
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"the browser test must run in CI: {why}")
    pytest.skip(why)


def free_port() -> int:
    """Return a TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def jupyter_env(home: str) -> dict:
    """Return an environment whose Jupyter and IPython state lives under ``home``."""
    env = dict(os.environ)
    for var, sub in (("JUPYTER_DATA_DIR", "data"), ("JUPYTER_CONFIG_DIR", "config"),
                     ("JUPYTER_RUNTIME_DIR", "runtime"), ("IPYTHONDIR", "ipython")):
        path = os.path.join(home, sub)
        os.makedirs(path, exist_ok=True)
        env[var] = path
    # No news or update checks (nothing outside 127.0.0.1 is reached, no toast over the page).
    settings = os.path.join(home, "lab-settings", "@jupyterlab", "apputils-extension")
    os.makedirs(settings, exist_ok=True)
    with open(os.path.join(settings, "notification.jupyterlab-settings"), "w") as f:
        f.write('{"fetchNews": "false", "checkForUpdates": false}')
    env["JUPYTERLAB_SETTINGS_DIR"] = os.path.join(home, "lab-settings")
    env["TRITON_INTERPRET"] = "1"
    env["JUPYTER_PLATFORM_DIRS"] = "1"
    return env


@contextlib.contextmanager
def jupyterlab(root_dir: str, timeout_s: float = 120):
    """Start JupyterLab serving ``root_dir`` on 127.0.0.1 (no token, temp data dirs); yield its
    base URL; stop it at the end. Its log is in ``root_dir/../jupyter.log``."""
    home = tempfile.mkdtemp(prefix="tv-jupyter-")
    port = free_port()
    log_path = os.path.join(os.path.dirname(os.path.abspath(root_dir)), "jupyter.log")
    cmd = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--allow-root", "--ip=127.0.0.1",
           f"--port={port}", "--ServerApp.port_retries=0", "--IdentityProvider.token=", "--ServerApp.password=",
           f"--ServerApp.root_dir={root_dir}", "--LabApp.news_url=",
           "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=jupyter_env(home), cwd=root_dir)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with {proc.returncode}: {_tail(log_path)}")
            try:
                with urllib.request.urlopen(url + "/api/status", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"JupyterLab did not answer within {timeout_s:.0f} s: {_tail(log_path)}")
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(home, ignore_errors=True)


def _tail(path: str, n: int = 2000) -> str:
    try:
        with open(path) as f:
            return f.read()[-n:]
    except OSError:
        return "(no log)"


@contextlib.contextmanager
def chromium_page(width: int = 1500, height: int = 1000):
    """Yield a Playwright page in headless Debian Chromium with a temp profile."""
    from playwright.sync_api import sync_playwright
    profile = tempfile.mkdtemp(prefix="tv-chromium-")
    try:
        with sync_playwright() as pw:
            ctx = pw.chromium.launch_persistent_context(
                profile, executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
                viewport={"width": width, "height": height})
            try:
                page = ctx.pages[0] if ctx.pages else ctx.new_page()
                yield page
            finally:
                ctx.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


@contextlib.contextmanager
def file_page(path, width: int = 1500, height: int = 1000):
    """Open the local HTML file ``path`` in :func:`chromium_page`; yield ``(page, errors)``, where
    ``errors`` collects the page's uncaught script errors (a test ends asserting it is empty)."""
    import pathlib
    with chromium_page(width, height) as page:
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(pathlib.Path(path).resolve().as_uri())
        yield page, errors


def open_and_run_all(page, url: str, notebook: str, timeout_ms: int = 120_000) -> None:
    """Open ``notebook`` in JupyterLab, wait for the kernel to be idle, and run every cell."""
    page.goto(f"{url}/lab/tree/{notebook}?reset", timeout=timeout_ms)  # reset: no tabs restored
    page.locator(".jp-Notebook:visible").first.wait_for(timeout=timeout_ms)
    wait_idle(page, timeout_ms)
    current = page.locator("#jp-left-stack:visible")
    if current.count():  # fold the file browser away: the notebook gets the width
        page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current").first.click()
    page.locator(".jp-Notebook:visible").first.click()
    page.locator(".lm-MenuBar-item", has_text="Run").first.click()
    page.locator(".lm-Menu-item", has_text="Run All Cells").first.click()


def wait_idle(page, timeout_ms: int) -> None:
    """Wait until the status bar says the kernel is idle."""
    page.locator("#jp-main-statusbar", has_text="Idle").wait_for(timeout=timeout_ms)
