"""Load shapes for Loadline: which load to apply when, and the phase timeline it leaves behind.

Each shape answers one question (see docs/shapes.md) and is described as a plain list of phases
computed from options, so `tick()` only walks that list. Entry files in `locustfiles/shape_*.py`
import the classes from here.
"""
