"""Schema drift between our wire schema and the installed Python SDKs' own descriptors.

Facts checked against docs/protocol-facts.md §2.3-2.5 and tests/wire/facts/message-tables.md.
"""
from __future__ import annotations

import pytest

from conformance.drift.report import compare, default_sdks, dump_ours, dump_sdk, render_markdown

pytestmark = pytest.mark.sdk

SDKS = {s.key: s for s in default_sdks()}


@pytest.fixture(scope="module")
def ours():
    return dump_ours()


def _drift(key, ours):
    sdk = SDKS[key]
    if not sdk.installed():
        pytest.fail(f"{key} not installed: run {sdk.install} (CI installs every SDK first)")
    schema, reserved = ours
    return compare(schema, dump_sdk(sdk), reserved)


@pytest.fixture(scope="module")
def dx(ours):
    return _drift("dx", ours)


@pytest.fixture(scope="module")
def dd(ours):
    return _drift("dd", ours)


def _nums(entries):
    return {e["number"]: e["name"] for e in entries}


def test_dx_schedule_task_router_added_and_reserved_in_ours(dx):
    added = dx["paired"]["ScheduleTaskAction"]["added"]
    assert [(a["number"], a["name"], a["reserved_in_ours"]) for a in added] == [(4, "router", True)]
    assert _nums(dx["paired"]["CreateChildWorkflowAction"]["added"]) == {5: "router"}
    assert _nums(dx["paired"]["CreateDetachedWorkflowAction"]["added"]) == {9: "router"}


def test_dx_workflow_state_16_17_missing(dx):
    assert _nums(dx["paired"]["WorkflowState"]["missing"]) == {16: "parentAppId", 17: "startedAt"}


def test_dx_matches_protocol_facts_2_5(dx):
    # 1.18.3 vs Go HEAD (= ours): no message only in 1.18.3 (besides its backend package),
    # Go HEAD adds CachedHistory and RetryParentInstanceInfo.
    assert dx["only_in_ours"] == ["CachedHistory", "RetryParentInstanceInfo"]
    assert all(n.startswith("durabletask.protos.backend.v1.") for n in dx["only_in_sdk"])
    missing = {m: _nums(r["missing"]) for m, r in dx["paired"].items() if r["missing"]}
    assert missing == {
        "ChildWorkflowInstanceCreatedEvent": {8: "retryParentInstanceInfo"},
        "CreateChildWorkflowAction": {7: "retryParentInstanceInfo"},
        "CreateInstanceRequest": {10: "enforceUniqueInstanceId", 11: "router"},
        "GetInstanceRequest": {3: "router"},
        "GetWorkItemsRequest": {4: "capabilities"},
        "PurgeInstancesRequest": {5: "router"},
        "RaiseEventRequest": {4: "router"},
        "RerunWorkflowFromEventRequest": {7: "router"},
        "ResumeRequest": {3: "router"},
        "SuspendRequest": {3: "router"},
        "TerminateRequest": {4: "router"},
        "WorkflowRequest": {9: "cachedHistory"},
        "WorkflowState": {16: "parentAppId", 17: "startedAt"},
    }
    assert dx["summary"]["renamed"] == 0


def test_dx_no_type_conflicts(dx):
    # message-tables.md lists conflicts only between the Dapr and Microsoft dialects; within the
    # Dapr dialect (dx 1.18.3 vs Go HEAD = ours) §2.5 lists none.
    assert dx["summary"]["type_conflicts"] == 0
    assert dx["summary"]["label_differences"] == 0


def test_dd_uses_orchestrator_names(dd):
    rm = dd["renamed_messages"]
    assert rm["WorkflowRequest"] == "OrchestratorRequest"
    assert rm["WorkflowResponse"] == "OrchestratorResponse"
    assert rm["WorkflowAction"] == "OrchestratorAction"
    assert rm["WorkflowInstance"] == "OrchestrationInstance"
    assert rm["WorkflowState"] == "OrchestrationState"
    assert rm["WorkflowVersion"] == "OrchestrationVersion"
    assert rm["CreateChildWorkflowAction"] == "CreateSubOrchestrationAction"
    assert rm["WorkflowVersionNotAvailableAction"] == "OrchestratorVersionNotAvailableAction"


def test_dd_get_work_items_request_extra_fields(dd):
    r = dd["paired"]["GetWorkItemsRequest"]
    assert sorted(_nums(r["added"])) == [1, 2, 3, 10]
    assert all(a["reserved_in_ours"] for a in r["added"])
    assert _nums(r["missing"]) == {4: "capabilities"}


def test_dd_no_type_conflicts_and_known_additions(dd):
    # §2.5: 0.17.4 vs Go HEAD has no field number conflicts.
    assert dd["summary"]["type_conflicts"] == 0
    assert _nums(dd["paired"]["ScheduleTaskAction"]["added"]) == {4: "router"}
    assert _nums(dd["paired"]["CreateChildWorkflowAction"]["added"]) == {5: "router"}
    assert _nums(dd["paired"]["WorkflowRequest"]["added"]) == {5: "entityParameters"}
    assert {18, 19, *range(23, 30)} <= set(_nums(dd["paired"]["HistoryEvent"]["added"]))
    renamed = {c["number"]: (c["ours"], c["sdk"]) for c in dd["paired"]["HistoryEvent"]["renamed"]}
    assert renamed[14] == ("workflowStarted", "orchestratorStarted")


def test_markdown_renders(dx):
    md = render_markdown({"ours": {"proto": "p", "package": "x", "messages": 1},
                          "sdks": {"dx": {"title": "dx", "status": "ok", **dx},
                                   "zz": {"title": "zz", "status": "not installed", "install": "do it"}}})
    assert "### ScheduleTaskAction" in md and "(reserved in ours)" in md
    assert "not installed: `do it`" in md
