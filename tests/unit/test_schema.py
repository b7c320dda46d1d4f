"""One declaration of each run-folder table: core's schema is what writers write and analysis reads."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest
from synthetic import make_requests, write_run

from loadline.analysis.data import load
from loadline.analysis.data.load import load_run
from loadline.core import runfolder, schema
from loadline.core.records import COLUMNS, RequestRecord
from loadline.runtime.timeline import Timeline


def test_the_request_schema_is_the_record_itself():
    assert tuple(schema.REQUESTS) == COLUMNS
    assert schema.REQUESTS["e2e_ms"] == schema.FLOAT and schema.REQUESTS["connect_ms"] == schema.FLOAT
    assert schema.REQUESTS["prompt_tokens"] == schema.FLOAT  # int | None: empty cells read as NaN
    assert schema.REQUESTS["output_tokens"] == schema.INT and schema.REQUESTS["status"] == schema.STR
    # analysis stores what core declares: every numeric column of the record is read as a number
    assert set(load._FLOAT_COLUMNS) | set(load._INT_COLUMNS) == {
        f.name for f in dataclasses.fields(RequestRecord) if schema.REQUESTS[f.name] != schema.STR
    }


def test_a_field_of_an_undeclared_type_fails_at_import():
    @dataclasses.dataclass
    class Odd:
        when: list[float]

    with pytest.raises(TypeError, match="Odd.when"):
        schema.schema_of(Odd)


def test_phase_rows_written_by_the_timeline_read_back_with_their_types(tmp_path):
    runfolder.set_active(runfolder.ActiveRun(tmp_path, 0.0))
    try:
        timeline = Timeline(2, wall=lambda: 0.0)
        timeline.begin(0, "baseline", "baseline", 1, 1.0, 0, 1000.0, 10.0)
        timeline.begin(1, "step-1 (10 users)", "step", 10, 2.5, 1, 1010.0, 10.0)
        timeline.close(10, 1020.0, "stop rule: TTFT P95 900 ms > 800 ms")
    finally:
        runfolder.set_active(None)
    write_run(tmp_path, make_requests([1001.0, 1011.0], [100.0, 120.0]))
    (tmp_path / runfolder.FAULTS).write_text(
        ",".join(runfolder.FAULT_COLUMNS) + "\n" + "1012.5,1,step-1 (10 users),POST,/admin/faults/clear,{},ok,\n"
    )
    run = load_run(tmp_path)
    assert tuple(run.phases.columns[: len(runfolder.PHASE_COLUMNS)]) == runfolder.PHASE_COLUMNS
    for name, kind in schema.PHASES.items():
        numeric = pd.api.types.is_numeric_dtype(run.phases[name])
        assert numeric is (kind != schema.STR), name
    assert run.phases["note"].tolist() == ["", "stop rule: TTFT P95 900 ms > 800 ms"]
    assert run.faults.iloc[0].to_dict() == {
        "ts": 1012.5,
        "phase_index": 1,
        "phase": "step-1 (10 users)",
        "method": "POST",
        "path": "/admin/faults/clear",
        "body": "{}",
        "outcome": "ok",
        "detail": "",
    }
    assert not any("faults" in m for m in run.missing)  # only drills write it: its absence is no gap
