"""Dapr dialect of TaskHubSidecarService (generated module: taskhub_pb2)."""
