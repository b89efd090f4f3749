"""Transport limits shared by the reference sidecar and the reference worker (no grpc import here)."""

# daprd's --max-body-size default (4Mi), which daprd applies to its gRPC server's receive and
# send limits; the reference worker's --max-message-bytes has the same default.
DEFAULT_MAX_MESSAGE_BYTES = 4 * 1024 * 1024
