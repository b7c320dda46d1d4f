"""The web UI's own page files: package data in loadline/runtime/webui_assets/, read with importlib.resources.

- live.html, live.css, live.js: the live LLM page (/loadline/live), self-contained: the charts are
  drawn on <canvas> by live.js (no CDN, no bundle: the machines have no internet, and the echarts
  inside Locust's bundle is not reachable on its own). The look follows Locust's Charts tab
  (echarts, 300 px high, title top left, round legend icons, its colours and its light / dark
  palettes, refreshed every 2 s); the theme follows Locust's own switch (localStorage.theme, else
  the system's preference).
- ui.js: injected into Locust's page (/loadline/ui.js): the live view inside the LLM tab, the shapes'
  summaries in the class picker, the custom parameters in groups; the server fills in its two
  placeholders (webui_live.py).
"""

from __future__ import annotations

import functools
import importlib.resources

ASSETS = "webui_assets"
MIMETYPES = {".html": "text/html", ".css": "text/css", ".js": "text/javascript"}
PAGE_FILES = ("live.html", "live.css", "live.js", "ui.js")


@functools.cache
def asset(name: str) -> str:
    """The text of a page file (one of PAGE_FILES), read once per process."""
    if name not in PAGE_FILES:
        raise KeyError(name)
    return importlib.resources.files(__package__).joinpath(ASSETS, name).read_text(encoding="utf-8")


def mimetype(name: str) -> str:
    return MIMETYPES[name[name.rindex(".") :]]
