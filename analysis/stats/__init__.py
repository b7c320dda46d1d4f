"""analysis/stats."""
