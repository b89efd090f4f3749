"""Workflow subset of the Dapr runtime API (generated module: workflow_pb2)."""
