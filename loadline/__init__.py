"""Loadline: find the carrying capacity of LLM inference services with Locust."""

__version__ = "0.1.0"
