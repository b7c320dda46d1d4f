"""The web UI's run-folder zip (loadline/runtime/webui_files.py): streamed, complete, byte for byte."""

from __future__ import annotations

import io
import os
import zipfile

from loadline.runtime import webui_files


def test_the_zip_streams_every_file_of_the_run_folder(tmp_path, monkeypatch):
    monkeypatch.setattr(webui_files, "ZIP_CHUNK", 64 * 1024)
    run = tmp_path / "20261201-120000-ChatSessionUser"
    (run / "report").mkdir(parents=True)
    (run / "manifest.json").write_text('{"status": "finished"}')
    big = os.urandom(300 * 1024)  # incompressible: several chunks on the wire
    (run / "requests.csv").write_bytes(big)
    (run / "report" / "report.html").write_text("<html>report</html>")
    (run / "empty.csv").write_bytes(b"")
    (run / "requests.arrows").write_bytes(b"the same rows again")  # the columnar copy: not downloaded

    chunks = list(webui_files.zip_stream(run))
    assert sum(1 for c in chunks if c) > 3  # streamed as it is written, not built whole first
    with zipfile.ZipFile(io.BytesIO(b"".join(chunks))) as archive:
        assert archive.testzip() is None
        assert sorted(archive.namelist()) == sorted(
            f"{run.name}/{name}" for name in ("manifest.json", "requests.csv", "report/report.html", "empty.csv")
        )
        assert archive.read(f"{run.name}/requests.csv") == big
        assert archive.read(f"{run.name}/empty.csv") == b""
