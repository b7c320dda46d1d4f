"""loadline/runtime."""
