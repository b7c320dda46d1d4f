"""Loadline's shipped configuration (profiles, SLOs, prompt sets, simulator profiles, stage files).

Installed as the package `loadline_configs` (pyproject.toml) and found by loadline/core/resources.py,
so `configs/...` paths work from any directory. This folder is the only copy: edit it here.
"""
