"""The reference executor in a fresh process: `python -m conformance.fuzz.replay_worker`.

stdin: a JSON line `{"programs": {...}}`, then one JSON line per turn `{"iid", "past": [b64], "new": [b64]}`
(each event a base64 serialized HistoryEvent). stdout: one line per turn, the base64 serialized
WorkflowResponse of `execute(...)`.
"""

from __future__ import annotations

import base64
import json
import sys

from taskhub_programs import parse_bundle
from taskhub_wire import pb

from conformance.targets.reference import execute


def _events(items: list[str]) -> list[pb.HistoryEvent]:
    return [pb.HistoryEvent.FromString(base64.b64decode(x)) for x in items]


def main() -> int:
    lines = iter(sys.stdin.read().splitlines())
    bundle = parse_bundle(json.loads(next(lines)))
    for line in lines:
        if not line.strip():
            continue
        req = json.loads(line)
        result = execute(bundle, instance_id=req["iid"], past=_events(req["past"]), new=_events(req["new"]))
        resp = result.response(instance_id=req["iid"], completion_token="")
        sys.stdout.write(base64.b64encode(resp.SerializeToString(deterministic=True)).decode() + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
