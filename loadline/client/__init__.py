"""loadline/client."""
