"""Ctrl-C anywhere in a command is one line and exit 130, never a bare KeyboardInterrupt traceback."""

from __future__ import annotations

import importlib

from loadline.commands import main as dispatcher


def test_ctrl_c_while_the_command_module_loads_is_one_line(monkeypatch, capsys):
    # `loadline report` spends seconds importing pandas and matplotlib: a Ctrl-C lands there first
    def interrupted_import(name, package=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(importlib, "import_module", interrupted_import)
    assert dispatcher.main(["report", "somewhere"]) == 130
    err = capsys.readouterr().err
    assert err.strip() == "loadline report: interrupted"
