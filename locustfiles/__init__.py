"""Loadline's entry files for Locust's -f (installed as the package `loadline_locustfiles`, pyproject.toml).

They are passed to Locust by path, never imported as this package; loadline/core/resources.py finds them.
"""
