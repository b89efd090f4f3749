"""Transport limits shared by the reference sidecar and the reference worker (no grpc import here)."""

# daprd's --max-body-size default (4Mi), which daprd applies to its gRPC server's receive and
# send limits; the reference worker's --max-message-bytes has the same default.
DEFAULT_MAX_MESSAGE_BYTES = 4 * 1024 * 1024


def byte_count(text: str) -> int:
    """A command-line byte count (`--max-message-bytes`, `--max-payload`): a whole number above 0."""
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of bytes") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be greater than 0")
    return value
