"""History fuzzing and differential replay (docs/fuzzing.md).

- `programs`: Hypothesis strategies for random programs in the program language;
- `interleave`: valid histories, made by running a program on the reference's pure pieces
  (`fake_worker.replay.execute` answers, `fake_sidecar.engine.turns.decide_turn` commits) with
  random interleavings of completions, failures, timer firings, events, suspends, resumes,
  terminations and redeliveries;
- `mutate`: mutated histories (reordered, duplicated, dropped events, unknown task ids, truncated
  turns, wrong patch lists, events of unknown kinds);
- `campaign`: what a campaign reports (`CampaignResult`) and the command that runs it again;
- `workers`: workers under test (the reference executor, a fresh process, an SDK driver through the
  reference sidecar, an in-process function such as a mutant);
- `worker_fuzz`: determinism and differential replay campaigns for a worker;
- `engine_machine`: a Hypothesis state machine against the reference engine core;
- `flows`: flow-scenario fuzzing of a sidecar through the harness;
- `scenario_out`: findings as regression scenarios under scenarios/regressions/;
- `cli`: the `conformance fuzz` command.

The comparison rules (`compare`) and the history dialects live in `conformance.dialects`, shared
with the runner. The fuzzer takes the reference engine and executor from
`conformance.targets.reference`; `interleave` and `engine_machine` still import pieces of the
reference engine directly (tests/test_layering.py, CONFORMANCE_DEBT).
"""
