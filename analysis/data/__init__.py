"""analysis/data."""
