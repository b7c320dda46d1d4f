"""Whether a run's target is on the generator's own machine (recorded at the start of a run) and
whether the verdict may count the run's load as coming from there."""

from __future__ import annotations

import ipaddress
import socket

import pandas as pd
import pytest

from loadline.analysis.verdict.engine_host import generators_on_manifest_host
from loadline.core import target_host
from loadline.core.target_host import local_addresses, target_on_this_host


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8000",
        "http://127.8.9.10/v1",
        "http://localhost:8080",
        "https://LOCALHOST/v1",
        "http://[::1]:9000",
        "http://0.0.0.0:8000",
    ],
)
def test_loopback_and_wildcard_targets_are_this_machine(url):
    assert target_on_this_host(url) is True


def test_this_machines_own_name_and_interface_addresses_are_this_machine():
    assert target_on_this_host(f"http://{socket.gethostname()}:8000/v1") is True
    outside = [a for a in local_addresses() if not a.is_loopback]
    if not outside:
        pytest.skip("no interface address besides loopback here")
    for address in outside:
        host = f"[{address}]" if address.version == 6 else str(address)
        assert target_on_this_host(f"http://{host}:8000") is True, address


def test_an_address_of_no_interface_here_is_another_machine():
    mine = local_addresses()
    others = [ipaddress.ip_address(a) for a in ("198.51.100.77", "203.0.113.9", "10.255.254.253", "2001:db8::77")]
    others = [a for a in others if a not in mine]
    assert others, "every documentation address is on this machine"
    for address in others:
        host = f"[{address}]" if address.version == 6 else str(address)
        assert target_on_this_host(f"http://{host}:8000") is False, address


@pytest.mark.parametrize("url", ["http://inference.example.invalid:8000", "http://llm:8000", None, "", "not a url"])
def test_other_names_and_no_target_are_unknown_without_a_lookup(url, monkeypatch):
    def no_lookup(*args, **kwargs):
        raise AssertionError("a name was resolved")

    monkeypatch.setattr(socket, "getaddrinfo", no_lookup)
    monkeypatch.setattr(socket, "gethostbyname", no_lookup)
    assert target_on_this_host(url) is None


def test_without_an_interface_table_only_loopback_is_known(monkeypatch):
    def refuse():
        raise OSError("no /proc/net here")

    monkeypatch.setattr(target_host.psutil, "net_if_addrs", refuse)
    assert local_addresses() == set()
    assert target_on_this_host("http://127.0.0.1:1") is True
    assert target_on_this_host("http://198.51.100.77:1") is False


def _requests(*workers: str) -> pd.DataFrame:
    return pd.DataFrame({"worker_id": list(workers)})


@pytest.mark.parametrize(
    "manifest,requests,expected",
    [
        ({"workers": 0, "host": {"name": "gpu-1"}}, _requests("gpu-1-7-abcd"), True),  # one process: its host
        ({}, None, True),
        ({"workers": 2, "host": {"name": "gpu-1"}}, _requests("gpu-1-7-abcd", "gpu-1-8-ef01"), True),
        ({"workers": 2, "host": {"name": "gpu-1"}}, _requests("gpu-1-7-abcd", "cpu-box-3-9-ef01"), False),
        ({"workers": 2, "host": {"name": "gpu-1"}}, _requests("node-a-7-abcd"), False),
        ({"workers": 2, "host": {"name": "gpu-1"}}, None, False),  # workers, nothing to say where they ran
        ({"workers": 1}, _requests("gpu-1-7-abcd"), False),
        ({"runner": "MasterRunner", "workers": 0, "host": {"name": "gpu-1"}}, _requests("gpu-1-7-abcd"), True),
        ({"runner": "MasterRunner", "workers": 0, "host": {"name": "gpu-1"}}, _requests("gpu-2-7-abcd"), False),
        ({"runner": "LocalRunner", "workers": 0, "host": {"name": "gpu-1"}}, _requests("vm-7-abcd"), True),
    ],
)
def test_the_load_counts_as_the_manifests_machines_only_when_every_worker_ran_there(manifest, requests, expected):
    assert generators_on_manifest_host(manifest, requests) is expected
