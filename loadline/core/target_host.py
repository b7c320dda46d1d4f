"""Is the target on the machine that runs the load? Asked once, at the start of a run.

The verdict needs it (analysis/verdict/context.py, `engine_shares_host`): an engine on the load
generator's own machine shares its cores, so a starved generator there stretches the engine's step
times and fills the host's CPU too. A loopback URL says so by itself; a server bound to all
interfaces and reached by the machine's own address or name does not, so the run records the answer
in its manifest (`target_on_this_host`) while it runs on that machine: the report may be built
elsewhere. Names are not resolved (a slow resolver would hold up the start of the run): a name counts
when it is "localhost" or this machine's own hostname; any other name is unknown (None).
"""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

import psutil


def is_loopback_url(url: object) -> bool:
    """A loopback URL ("localhost", 127.0.0.0/8, ::1): only the machine it runs on can reach it."""
    host = urlsplit(str(url or "")).hostname or ""
    if host == "localhost":  # urlsplit lowers the host
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def target_on_this_host(url: str | None) -> bool | None:
    """True: the URL's host is this machine; False: an address of another; None: a name not known here."""
    host = urlsplit(str(url or "")).hostname or ""
    if not host:
        return None
    if is_loopback_url(url) or host == socket.gethostname().lower():
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    return address.is_unspecified or address in local_addresses()


def local_addresses() -> set[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """Every IP address of this machine's interfaces (a link-local one without its %zone)."""
    found: set[ipaddress.IPv4Address | ipaddress.IPv6Address] = set()
    try:
        interfaces = psutil.net_if_addrs()
    except (OSError, RuntimeError):  # no interface table to read (a sandbox without /proc/net, say)
        return found
    for addresses in interfaces.values():
        for entry in addresses:
            if entry.family in (socket.AF_INET, socket.AF_INET6):
                try:
                    found.add(ipaddress.ip_address(entry.address.split("%", 1)[0]))
                except ValueError:
                    continue
    return found
