"""Conformance harness for the Dapr Workflow / Durable Task protocol (TaskHubSidecarService)."""
