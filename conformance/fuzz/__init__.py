"""History fuzzing and differential replay (docs/fuzzing.md).

- `programs`: Hypothesis strategies for random programs in the program language;
- `interleave`: valid histories, made by running a program on the reference's pure pieces
  (`fake_worker.replay.execute` answers, `taskhub_core.machine.apply` commits) with
  random interleavings of completions, failures, timer firings, events, suspends, resumes,
  terminations and redeliveries;
- `mutate`: mutated histories (reordered, duplicated, dropped events, unknown task ids, truncated
  turns, wrong patch lists, events of unknown kinds);
- `compare`: the comparison rules of the differential (those of tests/worker/test_differential_dx.py);
- `workers`: workers under test (the reference executor, a fresh process, an SDK driver through the
  reference sidecar, an in-process function such as a mutant);
- `worker_fuzz`: determinism and differential replay campaigns for a worker;
- `engine_machine`: a Hypothesis state machine against the reference engine core;
- `flows`: flow-scenario fuzzing of a sidecar through the harness;
- `scenario_out`: findings as regression scenarios under scenarios/regressions/;
- `cli`: the `conformance fuzz` command.

This package is reference-side tooling: unlike the rest of the harness it imports the reference
engine and worker (their pure pieces) directly.
"""
