"""The reference engine: a Dapr-dialect TaskHubSidecarService that real SDKs run on.

`engine/` is the pure core (no gRPC); `server.py` translates gRPC to engine calls.
"""
