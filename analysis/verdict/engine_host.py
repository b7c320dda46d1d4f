"""Did the engine run on the load generator's own machine? Then the two share its cores, and a
starved generator stretches the engine's step times and fills the host's CPU too (the verdict's
precedence, analysis/verdict/bottleneck.py; docs/bottleneck.md).

A loopback target says so by its URL; a target the run found on its own machine at its start
(manifest `target_on_this_host`, loadline/core/target_host.py) counts when the load came from that
machine too.
"""

from __future__ import annotations

import pandas as pd

from loadline.core.identity import host_of_worker
from loadline.core.target_host import is_loopback_url


def engine_shares_host(manifest: dict, requests: pd.DataFrame | None) -> bool:
    if is_loopback_url(manifest.get("target")):
        return True
    return manifest.get("target_on_this_host") is True and generators_on_manifest_host(manifest, requests)


def generators_on_manifest_host(manifest: dict, requests: pd.DataFrame | None) -> bool:
    """Whether the load came from the machine that wrote the manifest: a single process, or workers
    whose ids (loadline/core/identity.py) all name that machine."""
    if not manifest.get("workers") and manifest.get("runner") != "MasterRunner":
        return True
    host = (manifest.get("host") or {}).get("name")
    if not host or requests is None or "worker_id" not in requests or requests.empty:
        return False
    return {host_of_worker(str(worker)) for worker in requests["worker_id"].dropna().unique()} == {host}
