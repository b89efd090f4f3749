"""The WorkflowAccessPolicy resource the daprd target writes for an app (engine-rules R11.11): its
`scopes` decide which daprd loads it (dapr pkg/internal/loader/disk/disk.go:95-98)."""

from __future__ import annotations

import yaml

from conformance.scenario.model import AccessRule
from conformance.targets.daprd import _access_policy

RULES = (AccessRule(callers=("a",), workflows=("w*",), activities=("x",)),)


def test_a_policy_is_scoped_to_its_app_unless_the_scenario_names_the_scopes() -> None:
    own = yaml.safe_load(_access_policy("callee", RULES))
    assert own["scopes"] == ["callee"]
    assert own["spec"]["rules"] == [{"callers": [{"appID": "a"}],
                                     "workflows": [{"name": "w*", "operations": ["schedule"]}],
                                     "activities": [{"name": "x"}]}]
    assert yaml.safe_load(_access_policy("scope-out", RULES, ("scope-in",)))["scopes"] == ["scope-in"]
    assert "scopes" not in yaml.safe_load(_access_policy("callee", RULES, ()))  # every app holding it
    assert yaml.safe_load(_access_policy("callee", ()))["spec"]["rules"] == []
