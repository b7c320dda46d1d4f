"""The embedded simulated OpenAI-compatible inference server (`loadline sim`); see docs/simulator.md."""
