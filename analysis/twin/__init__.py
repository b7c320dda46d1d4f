"""The digital twin: a simulator profile fitted to a run, and what its predictions may be trusted for."""
