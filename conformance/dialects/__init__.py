"""What differs between workers, shared by the runner (turn-level vectors) and the fuzzer.

Below both (docs/design.md §2): these modules import neither `conformance.runner` nor
`conformance.fuzz`.

- `turn`: a turn a worker is sent (`TurnCase`: the committed history and the delivered events);
- `history`: history dialects, the same turn as an SDK that numbers or reserves action ids
  differently writes it (`Dialect`);
- `vectors`: a scenario's turn-level vector in the dialect of the worker it is sent to;
- `compare`: comparing a worker's answer with the reference's, and each target's comparison
  profile (`Profile`, `profile_for`).
"""
