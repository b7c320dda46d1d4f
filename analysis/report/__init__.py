"""analysis/report."""
