"""Regenerate the recorded metric twins in this folder (run from the repository root).

    .venv/bin/python tests/data/make_metric_twins.py

Each file is a Prometheus `query_range` export (the format `loadline report --prometheus` reads) of
one constructed scenario from tests/layer_scenarios.py, scraped every 2 s, in one vendor's names:
vLLM (current), vLLM before the late-2025 renames, SGLang, TGI. The twins carry the same numbers
under different names; tests/test_bottleneck_twins.py checks they give the same verdict.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent.parent))

import layer_scenarios as layers  # noqa: E402
import metric_scenarios as ms  # noqa: E402

# scenario -> vendors whose metrics can express its bottleneck (TGI has no KV-cache gauge)
TWINS = {
    "scheduler": ("vllm", "sglang", "tgi"),
    "gpu_compute": ("vllm", "sglang", "tgi"),
    "healthy": ("vllm", "sglang", "tgi"),
    "kv_cache": ("vllm", "vllm_old", "sglang"),
    "memory_leak": ("vllm", "sglang"),
}
MAPPINGS = {"vllm": None, "vllm_old": ms.OLD_VLLM, "sglang": ms.SGLANG, "tgi": ms.TGI}


def to_query_range(table) -> dict:
    result = {}
    for ts, source, metric, labels, value in table.itertuples(index=False):
        if int(ts) % 2:  # every 2 s keeps the files small
            continue
        key = (source, metric, labels)
        if key not in result:
            metric_labels = {"__name__": metric, "instance": source, **json.loads(labels)}
            result[key] = {"metric": metric_labels, "values": []}
        result[key]["values"].append([ts, repr(float(value))])
    return {"status": "success", "data": {"resultType": "matrix", "result": list(result.values())}}


def main() -> None:
    for scenario, vendors in TWINS.items():
        base = ms.server_rows(getattr(layers, scenario)())
        for vendor in vendors:
            mapping = MAPPINGS[vendor]
            table = base if mapping is None else ms.rename(base, mapping, drop_unmapped_engine=vendor != "vllm_old")
            path = HERE / f"metrics_{scenario}_{vendor}.json.gz"
            text = json.dumps(to_query_range(table), separators=(",", ":")) + "\n"
            path.write_bytes(gzip.compress(text.encode(), mtime=0))
            print(path.name, path.stat().st_size)


if __name__ == "__main__":
    main()
