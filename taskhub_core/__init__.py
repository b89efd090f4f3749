"""The protocol's pure rules, in one place below the sidecar, the worker and the suite.

Imports only `taskhub_wire`. No I/O, no clock, no threads: callers pass the time and any fresh ids.

- `timestamps`: nanoseconds <-> protobuf Timestamps, the never-firing horizon, copying an event;
- `history`: what a committed event opens, resolves and records (resolution keys, patches, version);
- `patches`: the patch and version rules of a turn (stalls, the multiset difference recorded);
- `actions`: a worker's action as the history event, dispatch and message it becomes;
- `turn`: the decision on a worker's answer (commit, stall or abandon), as small named rules;
- `inbox`: due times, the R6.3 raised-event-cancels-timeout rule, continue-as-new carry-over;
- `machine`: one instance as a state machine, `apply(state, command) -> (state, effects)`, which the
  sidecar engine, the simulator and the fuzzer's schedules drive with their own schedulers.
"""
