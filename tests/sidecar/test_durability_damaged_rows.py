"""Damaged rows in the sidecar database give the clean store error, never a traceback.

A db is written by a real run, then one row is damaged by hand with sqlite3, and the sidecar
process (`python -m fake_sidecar`) is started on it.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import grpc
import pytest
from google.protobuf import empty_pb2

from fake_sidecar.server import SidecarServer
from taskhub_wire import pb
from taskhub_wire.rpc import TaskHubClient
from tests.sidecar.rawworker import RawWorker, complete
from tests.sidecar.test_durability import SidecarProcess, launch, processes  # noqa: F401 - fixture


def _finished_db(db: Path, background, iids: tuple[str, ...] = ("good", "hurt")) -> None:
    """Instances that ran one turn to completion, stored in `db`."""
    srv = SidecarServer.start(port=0, db=str(db))
    worker = RawWorker(srv.address)
    try:
        with grpc.insecure_channel(srv.address) as ch:
            client = TaskHubClient(ch)
            for iid in iids:
                req = pb.CreateInstanceRequest(instanceId=iid, name="W")
                req.input.value = '"in"'
                fut = background.submit(client.call, "StartInstance", req, timeout=10)
                worker.answer(worker.next_workflow(), complete(1, '"out"'))
                fut.result(timeout=10)
    finally:
        worker.cancel()
        srv.stop()


def _damage(db: Path, sql: str, *args: object) -> None:
    con = sqlite3.connect(db)
    try:
        assert con.execute(sql, args).rowcount == 1, f"{sql} damaged nothing"
        con.commit()
    finally:
        con.close()


def test_a_meta_value_of_empty_braces_stops_the_start_with_a_clean_error(tmp_path: Path, background) -> None:
    db = tmp_path / "s.db"
    _finished_db(db, background)
    _damage(db, "UPDATE instances SET meta = '{}' WHERE iid = 'hurt'")
    proc = SidecarProcess(db)
    try:
        assert not proc.wait_ready(), "the sidecar served a database with a damaged instance row"
        err = proc.stderr
        assert proc.popen.returncode == 2, (proc.popen.returncode, err)
        assert "Traceback" not in err and "KeyError" not in err, err
        assert "'hurt'" in err and "damaged" in err and "lacks seq" in err, err
    finally:
        proc.stop()


def test_a_parent_reference_without_its_task_id_stops_the_start_with_a_clean_error(tmp_path: Path,
                                                                                  background) -> None:
    db = tmp_path / "s.db"
    _finished_db(db, background)
    _damage(db, "UPDATE instances SET meta = json_set(meta, '$.parent', json('{\"iid\": \"good\"}')) "
                "WHERE iid = 'hurt'")
    proc = SidecarProcess(db)
    try:
        assert not proc.wait_ready(), "the sidecar served a database with a damaged parent reference"
        err = proc.stderr
        assert proc.popen.returncode == 2, (proc.popen.returncode, err)
        assert "Traceback" not in err and "KeyError" not in err, err
        assert "'hurt'" in err and "damaged" in err and "parent lacks task_id, name, exec_id" in err, err
    finally:
        proc.stop()


@pytest.mark.parametrize("blob", [b"\xff\xff\xff\xff", b"\x0a\x80"], ids=["garbage", "truncated"])
def test_a_garbage_history_blob_gives_data_loss_for_that_instance_only(tmp_path: Path, background, processes,
                                                                       blob: bytes) -> None:
    db = tmp_path / "s.db"
    _finished_db(db, background)
    _damage(db, "UPDATE history SET ev = ? WHERE iid = 'hurt' AND idx = 1", blob)
    proc = launch(processes, db)
    with grpc.insecure_channel(proc.address) as ch:
        client = TaskHubClient(ch)
        good = client.call("GetInstance", pb.GetInstanceRequest(instanceId="good", getInputsAndOutputs=True),
                           timeout=10)
        assert good.exists and good.workflowState.output.value == '"out"'
        for method, req in (("GetInstance", pb.GetInstanceRequest(instanceId="hurt")),
                            ("GetInstanceHistory", pb.GetInstanceHistoryRequest(instanceId="hurt"))):
            with pytest.raises(grpc.RpcError) as info:
                client.call(method, req, timeout=10)
            assert info.value.code() == grpc.StatusCode.DATA_LOSS, (method, info.value.code(), info.value.details())
            details = info.value.details()
            assert "'hurt'" in details and "history event #1" in details and "damaged" in details, details
        client.call("Hello", empty_pb2.Empty(), timeout=10)
    proc.stop()
    assert "Traceback" not in proc.stderr, proc.stderr
