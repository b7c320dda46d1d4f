"""An API key inside the URL (`--host https://user:key@host`) is never echoed."""

from __future__ import annotations

import argparse
import socket
from types import SimpleNamespace

import pytest

from loadline.commands import run, run_checks, target
from loadline.core.errors import UsageError
from loadline.core.manifest import options_dict
from loadline.core.redact import MARK

KEY = "sk-inurl-0123456789abcdef"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # closed again when we return: nothing listens there


@pytest.mark.parametrize(
    "url, bare",
    [
        (f"https://user:{KEY}@api.example.com/v1", "https://api.example.com/v1"),
        (f"http://{KEY}@127.0.0.1:8000", "http://127.0.0.1:8000"),
        (f"http://u:{KEY}@[::1]:8000/", "http://[::1]:8000/"),
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000"),
    ],
)
def test_the_reachability_check_goes_to_the_host_without_credentials(url, bare):
    assert target.without_userinfo(url) == bare


def test_an_unreachable_host_with_credentials_is_named_without_them():
    # before: "target http://user:sk-...@127.0.0.1:N is unreachable: Name or service not known"
    # (urllib read user:key@127.0.0.1 as a host name) -- the key on stderr, and the wrong reason
    with pytest.raises(UsageError) as raised:
        target.preflight(f"http://user:{KEY}@127.0.0.1:{_closed_port()}")
    assert KEY not in str(raised.value) and MARK in str(raised.value) and "refused" in str(raised.value)
    token = "ghtoken0123456789"  # a bare token as the URL's user, no password
    with pytest.raises(UsageError) as raised:
        target.preflight(f"http://{token}@127.0.0.1:{_closed_port()}")
    assert token not in str(raised.value) and MARK in str(raised.value)


def test_a_malformed_host_with_credentials_is_refused_without_them():
    parser = argparse.ArgumentParser()
    run.add_arguments(parser)
    with pytest.raises(UsageError) as raised:
        run_checks.validate(parser.parse_args(["--host", f"ftp://u:{KEY}@x"]))
    assert KEY not in str(raised.value)


def test_locusts_html_report_loses_the_credentials(tmp_path):
    page = tmp_path / "locust_report.html"
    page.write_text(
        f'<td>Target host</td><td>https://user:{KEY}@h:1</td><script>{{"host": "https://user:{KEY}@h:1"}}</script>'
    )
    target.scrub_credentials(page, f"https://user:{KEY}@h:1")
    assert KEY not in page.read_text() and "user:" not in page.read_text() and MARK in page.read_text()


def test_the_manifest_options_keep_no_credentials():
    options = SimpleNamespace(host=f"https://user:{KEY}@h:1", scrape_url=f"vllm=https://{KEY}@h:1/metrics", users=3)
    recorded = options_dict(options)
    assert KEY not in str(recorded) and recorded["users"] == 3
