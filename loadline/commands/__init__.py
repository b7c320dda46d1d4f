"""loadline/commands."""
