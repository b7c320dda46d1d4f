"""The target `loadline run` loads: is it there at all, and keeping its credentials out of what is written.

Credentials may ride in the URL (`https://user:KEY@host`): urllib cannot open such a URL (user:key@host
reads as a port), and they must reach no log, run folder or report (loadline/core/redact.py).
"""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from loadline.core.errors import UsageError
from loadline.core.redact import MARK, redact


def preflight(host: str) -> None:
    """Fail in one line, before any load, when the target does not answer at all.

    urllib cannot open a URL with credentials in it (user:key@host reads as a port): the check goes
    to the host alone, and the host is never shown with them."""
    try:
        urllib.request.urlopen(f"{without_userinfo(host).rstrip('/')}/v1/models", timeout=5).close()
    except urllib.error.HTTPError:
        return  # it answered (401/404 are the load test's business)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = redact(str(getattr(exc, "reason", exc)))
        raise UsageError(f"target {redact(host)} is unreachable: {reason}") from None


def scrub_credentials(path: Path, host: str) -> None:
    """Locust's own HTML report prints the host: credentials in it (user:key@host) become [REDACTED]."""
    userinfo = urllib.parse.urlsplit(host).netloc.rpartition("@")[0]
    if not userinfo or not path.is_file():
        return
    secrets = {userinfo, userinfo.partition(":")[2]} - {""}
    text = path.read_text(errors="replace")
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, MARK)
    path.write_text(text)


def without_userinfo(url: str) -> str:
    """`url` without `user:password@` (IPv6 brackets and ports kept)."""
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
