"""Time on the wire: integer nanoseconds and protobuf Timestamps."""

from __future__ import annotations

from google.protobuf.timestamp_pb2 import Timestamp

from taskhub_wire import pb

# A timer due later than this (about year 2116) never fires: the dx SDK's indefinite wait schedules
# one at 9999-12-31, which must be kept but never fired.
NEVER_NS = 2**62
MAX_TIMESTAMP_NS = 253402300799_999999999  # 9999-12-31T23:59:59.999999999Z, the last protobuf Timestamp
NS_PER_S = 1_000_000_000


def ts(ns: int) -> Timestamp:
    """A protobuf Timestamp for integer nanoseconds."""
    out = Timestamp()
    out.seconds, out.nanos = divmod(ns, NS_PER_S)
    return out


def ts_ns(stamp: Timestamp) -> int:
    """Integer nanoseconds of a protobuf Timestamp."""
    return stamp.seconds * NS_PER_S + stamp.nanos


def copy_event(ev: pb.HistoryEvent) -> pb.HistoryEvent:
    """A deep copy: history events are mutable messages, and a committed one must not change."""
    out = pb.HistoryEvent()
    out.CopyFrom(ev)
    return out
