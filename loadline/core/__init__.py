"""loadline/core."""
