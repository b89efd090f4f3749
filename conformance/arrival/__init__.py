"""Arrival-order coverage (docs/arrival-order.md): which (construct, arrival) cells a scenario, a
generated scenario or a fuzzer example reaches.

`cells` names the targets, `classify` finds them in histories, `generate` writes the scenarios of
scenarios/arrival/, `report` tabulates what each part of the library reaches.
"""
