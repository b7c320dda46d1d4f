"""Load shapes for Loadline: which load to apply when, and the phase timeline it leaves behind.

Each shape answers one question (see docs/shapes.md) and is described as a plain list of phases
computed from options, so `tick()` only walks that list. A shape is one module here (or one named
in LOADLINE_SHAPE_MODULES): shapes/catalog.py and shapes/registry.py find it, and the command line,
Locust's parser, locustfiles/shape.py and docs/shapes.md follow.
"""
