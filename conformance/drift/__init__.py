"""Schema drift: our wire schema (taskhub_wire/dapr/taskhub.proto) vs each SDK's own descriptors.

Run ``python -m conformance.drift`` to write reports/schema-drift.{md,json}; see report.py.
"""
