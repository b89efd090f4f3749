"""Engines (sidecars) the conformance suite runs against, and helpers for the processes it starts."""
