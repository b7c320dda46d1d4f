"""The web UI's page files are package data (loadline/runtime/webui_assets/) and read as such."""

from __future__ import annotations

import re

import pytest

from loadline.runtime.webui_page import PAGE_FILES, asset, mimetype


def test_every_page_file_is_read_from_the_package_and_the_live_page_names_its_own_files():
    assert all(asset(name).strip() for name in PAGE_FILES)
    linked = set(re.findall(r'(?:href|src)="\./(live\.(?:css|js))"', asset("live.html")))
    assert linked == {"live.css", "live.js"}
    assert {mimetype(name) for name in PAGE_FILES} == {"text/html", "text/css", "text/javascript"}
    # the two values the server fills in (webui_live.py)
    assert "__SHAPE_SUMMARIES__" in asset("ui.js") and "__FORM_GROUPS__" in asset("ui.js")


def test_only_the_page_files_are_served():
    with pytest.raises(KeyError):
        asset("../webui.py")
