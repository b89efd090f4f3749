"""`conformance capture` and `conformance replay`: check an application's new code against
workflow histories exported from a running engine (docs/replay.md)."""
