"""analysis/verdict."""
