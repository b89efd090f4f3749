"""Robustness: random and malformed requests never crash the reference sidecar.

Every unary RPC of both service tables and GetWorkItems gets (a) raw bytes: random,
truncated, bit-flipped, wrong-type and hand-made malformed protobuf, and (b) well-formed
messages with random field values built from the message descriptors (unicode and huge
strings, control characters, negative and extreme ids, unknown enum values, extreme
timestamps, bogus continuation tokens, completions with random tokens for random task
ids, random action lists applied to real in-flight turns, ...).

Property: every call either succeeds or fails, with a message, with a status other than
INTERNAL, UNKNOWN, UNAVAILABLE, DATA_LOSS, UNAUTHENTICATED or PERMISSION_DENIED
(DEADLINE_EXCEEDED only for the RPCs that legitimately block; UNIMPLEMENTED only for
multi-instance purge and unknown paths); a successful reply parses as the declared type. After each run the
server still serves: Hello works, ListInstanceIDs pages cleanly, GetInstance /
GetInstanceHistory / GetWorkflowBeta1 work on every listed id, and a fresh
start -> activity -> complete workflow driven by a RawWorker still completes.

Deterministic for CI: derandomized, no example database, no shrinking (a live server is
not a pure function; the falsifying example is printed as generated). The `test_regression_*`
tests pin each bug the fuzzing found, so each is reported on its own.
"""

from __future__ import annotations

import base64
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest
from google.protobuf import empty_pb2, message_factory
from google.protobuf.descriptor import FieldDescriptor as FD
from google.protobuf.message import Message
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from fake_sidecar.server import SidecarServer
from taskhub_wire import pb, rt
from taskhub_wire.rpc import DAPR_WORKFLOW, TASKHUB, DaprWorkflowClient, Kind, Method, TaskHubClient
from tests.sidecar.rawworker import RawWorker, child, complete, schedule, timer

# ----------------------------------------------------------------------------- settings

# The project's profile (tests/conftest.py), without shrinking: a robustness failure is a crash or a
# hang whose first example already says enough, and shrinking one RPC storm costs minutes.
CI = settings(phases=(Phase.explicit, Phase.generate))

BLOCK_TIMEOUT = 0.1  # RPCs that wait for a worker: a short deadline, DEADLINE_EXCEEDED is fine
CALL_TIMEOUT = 10.0  # everything else must answer well within this

METHODS: list[Method] = [m for table in (TASKHUB, DAPR_WORKFLOW) for m in table.methods.values()]
BLOCKING = {
    "StartInstance", "WaitForInstanceStart", "WaitForInstanceCompletion", "TerminateInstance",
    "SuspendInstance", "ResumeInstance", "GetWorkItems",
    "StartWorkflowBeta1", "StartWorkflowAlpha1", "TerminateWorkflowBeta1", "TerminateWorkflowAlpha1",
    "PauseWorkflowBeta1", "PauseWorkflowAlpha1", "ResumeWorkflowBeta1", "ResumeWorkflowAlpha1",
}
assert BLOCKING <= {m.name for m in METHODS}
NEVER = {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN, grpc.StatusCode.UNAVAILABLE,
         grpc.StatusCode.DATA_LOSS, grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED}

# ----------------------------------------------------------------------------- seeded instances

DONE = ["fz-done-0", "fz-done-1"]
FAILED = ["fz-fail-0"]
SUSPENDED = ["fz-susp-0"]
TIMER = ["fz-timer-0"]
PARENT = ["fz-parent-0"]
CHILD = ["fz-parent-0:0001"]
ACTS = ["fz-act-0", "fz-act-1"]  # two activities (task ids 1, 2) out on the holder's stream
TURNS = ["fz-turn-0", "fz-turn-1", "fz-turn-2"]  # first turn out on the holder's stream
SEEDED = DONE + FAILED + SUSPENDED + TIMER + PARENT + CHILD + ACTS + TURNS
HOT = ACTS + TURNS + CHILD + PARENT + SUSPENDED + TIMER

# ----------------------------------------------------------------------------- strategies

def _rare(common: st.SearchStrategy, rare: st.SearchStrategy, one_in: int) -> st.SearchStrategy:
    """`rare` about once in `one_in` draws, else `common` (one_of would pick them evenly)."""
    return st.integers(0, one_in - 1).flatmap(lambda k: rare if k == 0 else common)


HUGE = st.builds(lambda ch, n: ch * n, st.sampled_from(["x", "é", "🙂", "\x00", "\u202e"]),
                 st.sampled_from([1025, 70_000, 600_000]))
SHORT = st.one_of(
    st.sampled_from(["", "A", "W", " ", "\x00", "é", "🙂", "a/b", "..", "%s%n", "\u202e", "\ufeff",
                     "'; DROP TABLE instances; --", "null", "-1", "a" * 1024, "a" * 1025]),
    st.text(max_size=24),
    st.text(st.characters(max_codepoint=31), max_size=6),
)
TEXT = _rare(SHORT, HUGE, 60)
IDS = st.integers(0, 9).flatmap(lambda k: (
    st.sampled_from(SEEDED) if k < 5 else
    st.from_regex(r"fz-[ab][0-2]", fullmatch=True) if k < 7 else
    st.just("") if k == 7 else TEXT))
NAMES = st.one_of(st.sampled_from(["A", "W", "step", ""]), TEXT)
TOKENS = st.integers(0, 3).flatmap(lambda k: st.just("") if k < 2 else
                                   st.just(uuid.UUID(int=0).hex) if k == 2 else TEXT)
SMALL_IDS = _rare(st.integers(-2, 6), st.sampled_from([2**31 - 1, -2**31, 65535, 65536]), 8)
CONT_TOKENS = st.one_of(
    TEXT,
    st.builds(lambda s: base64.urlsafe_b64encode(f"after:{s}".encode()).decode(), TEXT),
    st.builds(lambda b: base64.urlsafe_b64encode(b).decode(), st.binary(max_size=24)),
    st.sampled_from(["=", "====", "YWZ0ZXI6", "YWZ0ZXI6__4=", "after:x"]),
)
INT32 = st.one_of(st.sampled_from([0, 1, -1, 2, 2**31 - 1, -2**31]), st.integers(-2**31, 2**31 - 1))
INT64 = st.one_of(st.sampled_from([0, 1, -1, 2**63 - 1, -2**63]), st.integers(-2**63, 2**63 - 1))
UINT32 = st.one_of(st.sampled_from([0, 1, 2, 3, 2**31, 2**32 - 1]), st.integers(0, 2**32 - 1))
UINT64 = st.one_of(st.sampled_from([0, 1, 2**64 - 1]), st.integers(0, 2**64 - 1))
SECONDS = st.one_of(
    st.integers(-2, 5).map(lambda d: int(time.time()) + d),  # due now or very soon: timers fire
    st.sampled_from([0, -1, 2**63 - 1, -2**63, 2**33, 2**40, 253402300799, 253402300800, 4102444800]),
    INT64,
)
NANOS = st.one_of(st.sampled_from([0, 999_999_999, 1_000_000_000, -1, 2**31 - 1, -2**31]),
                  st.integers(0, 999_999_999))
BYTES = st.one_of(st.binary(max_size=32), st.sampled_from([b"\xff\xfe", b"\xc0\x80", b"\xed\xa0\x80", b"{}"]),
                  st.builds(lambda s: s.encode(), SHORT))

FIELD_OVERRIDES: dict[str, st.SearchStrategy] = {
    **{n: IDS for n in ("instanceId", "instance_id", "sourceInstanceID", "newInstanceID",
                        "newChildWorkflowInstanceID")},
    **{n: NAMES for n in ("name", "workflow_name", "event_name")},
    "completionToken": TOKENS,
    **{n: SMALL_IDS for n in ("id", "eventId", "taskId", "taskScheduledId", "timerId")},
    "eventID": st.one_of(st.integers(0, 6), UINT32),
    "continuationToken": CONT_TOKENS,
    "pageSize": st.one_of(st.sampled_from([0, 1, 2, 3, 1024, 2**32 - 1]), UINT32),
}
_SCALARS: dict[int, st.SearchStrategy] = {
    FD.TYPE_STRING: TEXT, FD.TYPE_BYTES: BYTES, FD.TYPE_BOOL: st.booleans(),
    FD.TYPE_INT32: INT32, FD.TYPE_SINT32: INT32, FD.TYPE_SFIXED32: INT32,
    FD.TYPE_INT64: INT64, FD.TYPE_SINT64: INT64, FD.TYPE_SFIXED64: INT64,
    FD.TYPE_UINT32: UINT32, FD.TYPE_FIXED32: UINT32, FD.TYPE_UINT64: UINT64, FD.TYPE_FIXED64: UINT64,
    FD.TYPE_DOUBLE: st.floats(), FD.TYPE_FLOAT: st.floats(width=32),
}
MAX_DEPTH = 5


def _cls(f: FD) -> type[Message]:
    return message_factory.GetMessageClass(f.message_type)


def _scalar(f: FD) -> st.SearchStrategy:
    if f.name in FIELD_OVERRIDES and f.type in (FD.TYPE_STRING, FD.TYPE_INT32, FD.TYPE_UINT32):
        return FIELD_OVERRIDES[f.name]
    if f.type == FD.TYPE_ENUM:
        known = [v.number for v in f.enum_type.values]
        return st.one_of(st.sampled_from(known), st.sampled_from([99, 1000, -1, 2**31 - 1, -2**31]))
    return _SCALARS[f.type]


@st.composite
def messages(draw, cls: type[Message], depth: int = 0) -> Message:
    """A message of type `cls` with a random subset of its fields set to random values."""
    msg = cls()
    desc = cls.DESCRIPTOR
    if desc.full_name == "google.protobuf.Timestamp":
        msg.seconds, msg.nanos = draw(SECONDS), draw(NANOS)
        return msg
    if depth > MAX_DEPTH:
        return msg
    skip: set[str] = set()
    for oneof in desc.oneofs:
        members = list(oneof.fields)
        if len(members) > 1:  # a real oneof (proto3 `optional` makes one-member synthetic ones)
            pick = draw(st.sampled_from([None, *members]))
            skip.update(m.name for m in members if m is not pick)
    for f in desc.fields:
        if f.name in skip or not draw(st.booleans()):
            continue
        target = getattr(msg, f.name) if f.is_repeated or f.type == FD.TYPE_MESSAGE else None
        if f.type == FD.TYPE_MESSAGE and f.message_type.GetOptions().map_entry:
            key_f, val_f = f.message_type.fields_by_name["key"], f.message_type.fields_by_name["value"]
            for _ in range(draw(st.integers(0, 3))):
                key = draw(_scalar(key_f))
                if val_f.type == FD.TYPE_MESSAGE:
                    target[key].CopyFrom(draw(messages(_cls(val_f), depth + 1)))
                else:
                    target[key] = draw(_scalar(val_f))
        elif f.is_repeated:
            count = draw(st.integers(0, 3 if depth < 2 else 1))
            if f.type == FD.TYPE_MESSAGE:
                for _ in range(count):
                    target.add().CopyFrom(draw(messages(_cls(f), depth + 1)))
            else:
                target.extend(draw(_scalar(f)) for _ in range(count))
        elif f.type == FD.TYPE_MESSAGE:
            target.CopyFrom(draw(messages(_cls(f), depth + 1)))
        else:
            setattr(msg, f.name, draw(_scalar(f)))
    return msg


def _nest_groups(depth: int) -> bytes:
    return b"\x0b" * depth + b"\x0c" * depth


def _nest_len(depth: int) -> bytes:
    out = b""
    for _ in range(depth):
        out = b"\x12" + _varint(len(out)) + out
    return out


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


MALFORMED = [
    b"\x0a\xff\xff\xff\xff\x0f",            # length prefix far past the end
    b"\x0a\x05ab",                           # truncated length-delimited field
    b"\x0a\x02\xff\xfe", b"\x12\x02\xc0\x80",  # invalid UTF-8 in a string field
    b"\x0b", b"\x0c", b"\x0b\x14",           # unterminated / stray / mismatched groups
    b"\x08", b"\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",  # truncated / overlong varint
    b"\x07", b"\x00", b"\x00" * 4096,        # wire type 7, field number 0
    b"\xf8\xff\xff\xff\x0f\x01",            # the largest field number
    b"\x0d\x01\x02", b"\x09\x01\x02\x03",   # truncated fixed32 / fixed64
    _nest_groups(150), _nest_groups(5000),   # past the parser's recursion limit
    _nest_len(120), _nest_len(2000),
    b"\x10\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01",  # varint that overflows 64 bits
    b"\x22\x03\x0a\x01",                     # nested message cut short
    b"\x08" + _varint(2**64 - 1) + b"\x10" + _varint(2**63),
]
REQUEST_TYPES = sorted({m.request for m in METHODS}, key=lambda c: c.DESCRIPTOR.full_name)


def _flip(data: bytes, pos: int, mask: int) -> bytes:
    if not data:
        return bytes([mask])
    i = pos % len(data)
    return data[:i] + bytes([data[i] ^ mask]) + data[i + 1:]


def raw_payloads(cls: type[Message]) -> st.SearchStrategy[bytes]:
    valid = messages(cls).map(lambda m: m.SerializeToString())
    return st.one_of(
        st.binary(max_size=48),
        st.binary(min_size=200, max_size=3000),
        st.sampled_from(MALFORMED),
        st.tuples(valid, st.integers(0, 10**6)).map(lambda t: t[0][: t[1] % (len(t[0]) + 1)]),
        st.tuples(valid, st.integers(0, 10**6), st.integers(1, 255)).map(lambda t: _flip(*t)),
        st.tuples(valid, st.binary(min_size=1, max_size=12)).map(lambda t: t[0] + t[1]),
        st.sampled_from(REQUEST_TYPES).flatmap(lambda c: messages(c)).map(lambda m: m.SerializeToString()),
    )


# ----------------------------------------------------------------------------- environment

# Random histories can hold many huge strings: the fuzzed sidecar allows 64 MiB messages (not
# its 4 MiB default; test_hostile.py tests that limit) and the client reads as much, so a big
# history is not mistaken for a broken server.
BIG_BYTES = 64 * 1024 * 1024
BIG = [("grpc.max_receive_message_length", BIG_BYTES), ("grpc.max_send_message_length", BIG_BYTES)]


class BigWorker(RawWorker):
    """A RawWorker whose channel accepts work items as large as the sidecar sends."""

    def __post_init__(self) -> None:
        self.channel = grpc.insecure_channel(self.address, options=BIG)
        self.client = TaskHubClient(self.channel, metadata=self.metadata)
        self._call = self.client.stream("GetWorkItems", pb.GetWorkItemsRequest(capabilities=list(self.capabilities)))
        self._thread = threading.Thread(target=self._pump, daemon=True)
        self._thread.start()


@dataclass
class Env:
    srv: SidecarServer
    channel: grpc.Channel
    client: TaskHubClient
    dapr: DaprWorkflowClient
    holder: BigWorker | None = None
    pool: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(max_workers=8))
    codes: dict[str, set[str]] = field(default_factory=dict)
    ops: dict[str, int] = field(default_factory=dict)
    serial: int = 0

    def invoke(self, method: Method, raw: bytes, block_timeout: float = BLOCK_TIMEOUT,
               ) -> tuple[grpc.StatusCode, str, bytes | None]:
        timeout = block_timeout if method.name in BLOCKING else CALL_TIMEOUT
        try:
            if method.kind is Kind.SERVER_STREAM:
                call = self.channel.unary_stream(method.path)(raw, timeout=timeout)
                for _ in call:
                    pass
                return grpc.StatusCode.OK, "", None
            return grpc.StatusCode.OK, "", self.channel.unary_unary(method.path)(raw, timeout=timeout)
        except grpc.RpcError as exc:
            return exc.code(), exc.details() or "", None

    def check(self, method: Method, raw: bytes, block_timeout: float = BLOCK_TIMEOUT) -> None:
        code, details, reply = self.invoke(method, raw, block_timeout)
        self.codes.setdefault(method.name, set()).add(code.name)
        where = f"{method.path} with {len(raw)} request bytes {raw[:120]!r}"
        assert code not in NEVER, f"{where} -> {code.name}: {details}"
        if code is grpc.StatusCode.DEADLINE_EXCEEDED:
            assert method.name in BLOCKING, f"{where} hung until the {CALL_TIMEOUT}s deadline"
        if code is grpc.StatusCode.UNIMPLEMENTED:
            assert method.name == "PurgeInstances", f"{where} -> UNIMPLEMENTED: {details}"
        if code is not grpc.StatusCode.OK:
            assert details, f"{where} -> {code.name} without a message"
        if reply is not None:
            method.response.FromString(reply)  # a well-formed answer of the declared type

    def close(self) -> None:
        if self.holder is not None:
            self.holder.cancel()
        self.channel.close()
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.srv.stop()


def _start_req(iid: str, name: str = "W", input: str | None = "1") -> pb.CreateInstanceRequest:
    req = pb.CreateInstanceRequest(instanceId=iid, name=name)
    if input is not None:
        req.input.value = input
    return req


def _next_for(worker: RawWorker, iid: str, want: str = "workflowRequest", timeout: float = 10.0) -> pb.WorkItem:
    """The next item of kind `want` for instance `iid`; other items are left unanswered."""
    end = time.monotonic() + timeout
    while True:
        item = worker.next(max(0.01, end - time.monotonic()))
        kind = item.WhichOneof("request")
        owner = (item.workflowRequest.instanceId if kind == "workflowRequest"
                 else item.activityRequest.workflowInstance.instanceId)
        if kind == want and owner == iid:
            return item


def seed(env: Env) -> None:
    """Instances in many states; the holder keeps some turns and activities out, unanswered."""
    w, c = env.holder, env.client
    assert w is not None
    for iid in DONE:
        fut = env.pool.submit(c.call, "StartInstance", _start_req(iid), timeout=10)
        w.answer(_next_for(w, iid), schedule(1, "A", "in"), timer(2, time.time_ns()))
        fut.result(timeout=10)
        w.complete_activity(_next_for(w, iid, "activityRequest"), "out")
        w.answer(_next_for(w, iid), complete(3, "done"))
    fut = env.pool.submit(c.call, "StartInstance", _start_req(FAILED[0]), timeout=10)
    w.answer(_next_for(w, FAILED[0]), complete(1, status=pb.ORCHESTRATION_STATUS_FAILED))
    fut.result(timeout=10)
    fut = env.pool.submit(c.call, "StartInstance", _start_req(SUSPENDED[0]), timeout=10)
    w.answer(_next_for(w, SUSPENDED[0]))
    fut.result(timeout=10)
    fut = env.pool.submit(c.call, "SuspendInstance", pb.SuspendRequest(instanceId=SUSPENDED[0]), timeout=10)
    w.answer(_next_for(w, SUSPENDED[0]))
    fut.result(timeout=10)
    fut = env.pool.submit(c.call, "StartInstance", _start_req(TIMER[0]), timeout=10)
    w.answer(_next_for(w, TIMER[0]), timer(1, time.time_ns() + 3600 * 10**9))
    fut.result(timeout=10)
    # From here on, work stays out on the holder's stream.
    fut = env.pool.submit(c.call, "StartInstance", _start_req(PARENT[0]), timeout=10)
    w.answer(_next_for(w, PARENT[0]), child(1, "C", "x"))
    fut.result(timeout=10)
    for iid in ACTS:
        fut = env.pool.submit(c.call, "StartInstance", _start_req(iid), timeout=10)
        w.answer(_next_for(w, iid), schedule(1, "A", "x"), schedule(2, "B"))
        fut.result(timeout=10)
    for iid in TURNS:
        # Blocks until someone answers the first turn; the fuzzer may (empty token), or not.
        env.pool.submit(c.call, "StartInstance", _start_req(iid), timeout=30)
    end = time.monotonic() + 10
    while not all(c.call("GetInstance", pb.GetInstanceRequest(instanceId=i), timeout=5).exists for i in TURNS):
        assert time.monotonic() < end, "seeding: the held instances were not created"
        time.sleep(0.01)


def make_env(tmp_path: Path, *, seeded: bool, db: str | None = None) -> Env:
    srv = SidecarServer.start(port=0, db=db or str(tmp_path / "fuzz.db"), max_message_bytes=BIG_BYTES)
    channel = grpc.insecure_channel(srv.address, options=BIG)
    env = Env(srv=srv, channel=channel, client=TaskHubClient(channel), dapr=DaprWorkflowClient(channel))
    if seeded:
        env.holder = BigWorker(srv.address)
        seed(env)
    return env


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    e = make_env(tmp_path, seeded=True)
    try:
        yield e
    finally:
        e.close()


@pytest.fixture
def bare_env(tmp_path: Path) -> Iterator[Env]:
    e = make_env(tmp_path, seeded=False)
    try:
        yield e
    finally:
        e.close()


# ----------------------------------------------------------------------------- after the storm

def list_all_ids(client: TaskHubClient) -> list[str]:
    ids: list[str] = []
    token: str | None = None
    for _ in range(100_000):
        req = pb.ListInstanceIDsRequest(pageSize=37)
        if token is not None:
            req.continuationToken = token
        resp = client.call("ListInstanceIDs", req, timeout=CALL_TIMEOUT)
        ids.extend(resp.instanceIds)
        if not resp.HasField("continuationToken"):
            return ids
        assert resp.instanceIds, "a page with a continuation token but no ids"
        token = resp.continuationToken
    raise AssertionError("ListInstanceIDs paging does not end")


def assert_consistent(env: Env) -> list[str]:
    c = env.client
    ids = list_all_ids(c)
    assert len(ids) == len(set(ids)), "ListInstanceIDs returned an id twice"
    assert set(ids) == set(env.srv.engine.instance_ids())
    known_status = set(pb.OrchestrationStatus.values())
    for iid in ids:
        got = c.call("GetInstance", pb.GetInstanceRequest(instanceId=iid, getInputsAndOutputs=True),
                     timeout=CALL_TIMEOUT)
        assert got.exists and got.workflowState.instanceId == iid, f"listed {iid!r} but GetInstance: {got}"
        assert got.workflowState.workflowStatus in known_status, (
            f"{iid!r} reports status {got.workflowState.workflowStatus}, outside OrchestrationStatus")
        c.call("GetInstanceHistory", pb.GetInstanceHistoryRequest(instanceId=iid), timeout=CALL_TIMEOUT)
        env.dapr.call("GetWorkflowBeta1", rt.GetWorkflowRequest(instance_id=iid), timeout=CALL_TIMEOUT)
    return ids


def assert_still_serves(env: Env) -> None:
    """Hello, a consistent listing, and a fresh workflow from start to completion."""
    env.client.call("Hello", empty_pb2.Empty(), timeout=CALL_TIMEOUT)
    assert_consistent(env)
    if env.holder is not None:
        env.holder.cancel()  # its work goes back to the queue; the new worker skips what is not its own
        env.holder = None
    worker = BigWorker(env.srv.address)
    try:
        iid = f"health-{uuid.uuid4().hex}"
        fut = env.pool.submit(env.client.call, "StartInstance", _start_req(iid, input="7"), timeout=20)
        worker.answer(_next_for(worker, iid, timeout=20), schedule(1, "A", "7"))
        assert fut.result(timeout=20).instanceId == iid
        act = _next_for(worker, iid, "activityRequest", timeout=20)
        assert act.activityRequest.input.value == "7"
        worker.complete_activity(act, "8")
        turn = _next_for(worker, iid, timeout=20)
        assert [e.taskCompleted.result.value for e in turn.workflowRequest.newEvents
                if e.HasField("taskCompleted")] == ["8"]
        worker.answer(turn, complete(2, "8"))
        done = env.client.call("WaitForInstanceCompletion",
                               pb.GetInstanceRequest(instanceId=iid, getInputsAndOutputs=True), timeout=20)
        assert done.workflowState.workflowStatus == pb.ORCHESTRATION_STATUS_COMPLETED
        assert done.workflowState.output.value == "8"
    finally:
        worker.cancel()


# ----------------------------------------------------------------------------- the fuzz tests

@pytest.mark.parametrize("method", METHODS, ids=lambda m: m.name)
def test_raw_bytes_to_every_method(bare_env: Env, method: Method) -> None:
    @settings(CI, max_examples=30)
    @given(raw=raw_payloads(method.request))
    def run(raw: bytes) -> None:
        bare_env.check(method, raw)

    run()
    assert "INVALID_ARGUMENT" in bare_env.codes.get(method.name, set()) or method.request is empty_pb2.Empty, (
        f"{method.path}: no malformed payload was rejected with INVALID_ARGUMENT: {bare_env.codes}")
    assert_still_serves(bare_env)


@pytest.mark.parametrize("method", METHODS, ids=lambda m: m.name)
def test_random_messages_to_every_method(env: Env, method: Method) -> None:
    @settings(CI, max_examples=12 if method.name in BLOCKING else 45)
    @given(msg=messages(method.request))
    def run(msg: Message) -> None:
        env.check(method, msg.SerializeToString())

    run()
    assert_still_serves(env)


RPC = {m.name: m for m in METHODS}
LIVE = TURNS + ACTS + [f"fz-{a}{n}" for a in "ab" for n in range(3)]  # (re)started during the storm
_OPS = st.integers(0, 19).flatmap(lambda k: (
    st.tuples(st.just("turn"), messages(pb.WorkflowResponse)) if k < 10 else
    st.tuples(st.just("activity"), messages(pb.ActivityResponse)) if k < 14 else
    st.tuples(st.just("start"), messages(pb.CreateInstanceRequest)) if k < 16 else
    st.tuples(st.just("raise"), messages(pb.RaiseEventRequest)) if k < 17 else
    st.tuples(st.just("purge"), messages(pb.PurgeInstancesRequest)) if k < 18 else
    st.tuples(st.just("stream"), messages(pb.GetWorkItemsRequest)) if k < 19 else
    st.tuples(st.sampled_from(["TerminateInstance", "SuspendInstance", "ResumeInstance"]),
              st.sampled_from([pb.TerminateRequest, pb.SuspendRequest, pb.ResumeRequest]).flatmap(messages))))
_TARGETS = st.integers(0, 9).flatmap(lambda k: st.sampled_from(LIVE) if k < 7 else
                                     st.sampled_from(HOT) if k < 9 else IDS)
_STORM_RPC = {"turn": "CompleteWorkflowTask", "activity": "CompleteActivityTask", "raise": "RaiseEvent",
              "purge": "PurgeInstances", "stream": "GetWorkItems", "start": "StartInstance"}


_FINAL = [pb.ORCHESTRATION_STATUS_COMPLETED, pb.ORCHESTRATION_STATUS_FAILED, pb.ORCHESTRATION_STATUS_TERMINATED,
          pb.ORCHESTRATION_STATUS_CANCELED, pb.ORCHESTRATION_STATUS_CONTINUED_AS_NEW]


def make_acceptable(action: pb.WorkflowAction, action_id: int) -> None:
    action.id = action_id
    kind = action.WhichOneof("workflowActionType")
    if kind is None:
        action.scheduleTask.name = "A"
    elif kind == "scheduleTask" and not action.scheduleTask.name:
        action.scheduleTask.name = "A"
    elif kind == "createChildWorkflow" and not action.createChildWorkflow.name:
        action.createChildWorkflow.name = "C"
    elif kind == "createDetachedWorkflow" and not action.createDetachedWorkflow.instanceId:
        action.createDetachedWorkflow.instanceId = f"fz-det-{action_id}"
    elif kind == "completeWorkflow" and action.completeWorkflow.workflowStatus not in _FINAL:
        action.completeWorkflow.workflowStatus = _FINAL[action_id % len(_FINAL)]


def _storm_step(env: Env, op: tuple[str, Message], iid: str, token: int, poke: int, legacy: bool,
                fresh: bool) -> None:
    """One step: mostly answers (empty token: accepted, so random actions really apply) to the
    turns and activities that the holder keeps out, plus starts, events, purges, streams."""
    kind, msg = op
    if kind != "stream" and (kind != "purge" or msg.WhichOneof("request") == "instanceId"):
        msg.instanceId = iid
    if kind in ("turn", "activity") and token:
        msg.completionToken = ""
    if kind == "start" and not msg.name:
        msg.name = "W"
    if kind == "turn" and fresh:
        # Half the answers are made acceptable (fresh action ids, R3.14; no malformed action,
        # R3.13) so their random content is applied; the other half stay as generated and are
        # mostly abandoned, which puts their instances into redelivery back-off.
        for action in msg.actions:
            env.serial += 1
            make_acceptable(action, 1000 + env.serial)
    if kind == "turn" and poke:
        # An event gives a running target a fresh turn, out on the holder's stream, to answer.
        env.check(RPC["RaiseEvent"], pb.RaiseEventRequest(instanceId=iid, name="poke").SerializeToString())
    name = _STORM_RPC.get(kind, kind)
    if kind == "turn" and legacy:
        name = "CompleteOrchestratorTask"
    env.ops[kind] = env.ops.get(kind, 0) + 1
    env.check(RPC[name], msg.SerializeToString(), block_timeout=0.05)


def storm(env: Env, examples: int) -> None:
    @settings(CI, max_examples=examples)
    @given(op=_OPS, iid=_TARGETS, token=st.integers(0, 3), poke=st.integers(0, 7), legacy=st.booleans(),
           fresh=st.booleans())
    def step(op: tuple[str, Message], iid: str, token: int, poke: int, legacy: bool, fresh: bool) -> None:
        _storm_step(env, op, iid, token, poke, legacy, fresh)

    step()
    c = env.srv.engine.counters
    answered = env.ops.get("turn", 0)
    reached = answered - c.unknown_turn - c.zombie_turn
    # The storm must really reach the engine's turn logic, not only its "no such turn" path
    # (typically 15-25% of the answers do: the rest find their target idle, finished, purged
    # or in redelivery back-off after an abandoned turn).
    assert reached >= min(20, answered // 10), f"only {reached} of {answered} answers met a turn in flight: {c}"


def test_worker_completions_against_inflight_turns(env: Env) -> None:
    """Random action lists and activity results applied (empty token) to real in-flight work."""
    storm(env, 600)
    assert_still_serves(env)


# ----------------------------------------------------------------------------- unknown paths

REMOVED = ["RewindInstance", "QueryInstances", "StreamInstanceHistory", "AbandonTaskActivityWorkItem",
           "AbandonTaskOrchestratorWorkItem", "AbandonTaskEntityWorkItem", "CreateTaskHub", "DeleteTaskHub",
           "SignalEntity", "GetEntity", "QueryEntities", "CleanEntityStorage", "CompleteEntityTask", "hello"]


@pytest.mark.parametrize("path", [f"/TaskHubSidecarService/{n}" for n in REMOVED] + [
    "/TaskHubSidecarService/", "/Nope.Service/Frob", "/dapr.proto.runtime.v1.Dapr/InvokeService",
    "/dapr.proto.runtime.v1.Dapr/StartWorkflowGamma1", "/taskhub.dapr.v1.TaskHubSidecarService/Hello",
    "/TaskHubSidecarService/Hello/extra"])
def test_unknown_method_paths_are_unimplemented(sidecar: SidecarServer, path: str) -> None:
    with grpc.insecure_channel(sidecar.address) as channel:
        for payload in (b"", b"\x0a\x01x", b"\xff\xff"):
            with pytest.raises(grpc.RpcError) as err:
                channel.unary_unary(path)(payload, timeout=5)
            assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED, (path, err.value.details())
            with pytest.raises(grpc.RpcError) as err:
                list(channel.unary_stream(path)(payload, timeout=5))
            assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED, (path, err.value.details())
        channel.unary_unary(TASKHUB.method("Hello").path)(b"", timeout=5)


_KNOWN_PATHS = {m.path for m in METHODS}


@settings(CI, max_examples=80)
@given(path=st.from_regex(r"/[A-Za-z][A-Za-z0-9_.]{0,30}/[A-Za-z][A-Za-z0-9_]{0,30}", fullmatch=True)
       .filter(lambda p: p not in _KNOWN_PATHS), payload=st.binary(max_size=32))
def _random_paths(channel: grpc.Channel, path: str, payload: bytes) -> None:
    with pytest.raises(grpc.RpcError) as err:
        channel.unary_unary(path)(payload, timeout=5)
    assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED, (path, err.value.details())


def test_random_method_paths_are_unimplemented(sidecar: SidecarServer) -> None:
    with grpc.insecure_channel(sidecar.address) as channel:
        _random_paths(channel)  # type: ignore[call-arg]
        channel.unary_unary(TASKHUB.method("Hello").path)(b"", timeout=5)


# ----------------------------------------------------------------------------- durable state after fuzzing

def test_fuzzed_state_survives_a_restart(tmp_path: Path) -> None:
    """After a storm, stop and restart on the same db: same instances, same histories."""
    db = str(tmp_path / "restart.db")
    env = make_env(tmp_path, seeded=True, db=db)
    try:
        storm(env, 300)
        env.holder.cancel()
        env.holder = None
        ids = assert_consistent(env)
        before = {i: [e.SerializeToString() for e in
                      env.client.call("GetInstanceHistory", pb.GetInstanceHistoryRequest(instanceId=i),
                                      timeout=CALL_TIMEOUT).events] for i in ids}
    finally:
        env.close()
    env = make_env(tmp_path, seeded=False, db=db)  # must load whatever the storm left behind
    try:
        after_ids = list_all_ids(env.client)
        assert sorted(after_ids) == sorted(ids)
        for i in ids:
            events = env.client.call("GetInstanceHistory", pb.GetInstanceHistoryRequest(instanceId=i),
                                     timeout=CALL_TIMEOUT).events
            # A timer may have fired, or a turn been committed, between the listing and the stop:
            # what was committed before must still be there, in order.
            assert [e.SerializeToString() for e in events][: len(before[i])] == before[i], i
        assert_still_serves(env)
    finally:
        env.close()


# ----------------------------------------------------------------------------- regressions found by fuzzing

def _one_turn(sidecar: SidecarServer, client: TaskHubClient, pool: ThreadPoolExecutor,
              iid: str = "r") -> tuple[RawWorker, pb.WorkItem]:
    worker = RawWorker(sidecar.address)
    pool.submit(client.call, "StartInstance", _start_req(iid), timeout=10)
    return worker, worker.next_workflow()


def test_regression_unknown_completion_status_abandons_the_turn(sidecar, client, background) -> None:
    """CompleteWorkflow{workflowStatus: 99}: a malformed action -> OK and the turn comes back (R3.13)."""
    worker, turn = _one_turn(sidecar, client, background)
    bad = pb.WorkflowAction(id=1)
    bad.completeWorkflow.workflowStatus = 99
    try:
        client.call("CompleteWorkflowTask", pb.WorkflowResponse(
            instanceId="r", completionToken=turn.completionToken, actions=[bad]), timeout=10)
    except grpc.RpcError as exc:
        pytest.fail(f"CompleteWorkflowTask with an unknown completion status -> {exc.code().name}: {exc.details()}")
    again = worker.next_workflow(timeout=10)  # the abandoned turn is redelivered
    assert again.workflowRequest.instanceId == "r"
    worker.answer(again, complete(1, "ok"))
    state = client.call("GetInstance", pb.GetInstanceRequest(instanceId="r"), timeout=10)
    assert state.workflowState.workflowStatus == pb.ORCHESTRATION_STATUS_COMPLETED
    worker.cancel()


def _carry_unknown_status(sidecar, client, background) -> RawWorker:
    """Continue-as-new carrying ExecutionCompleted{workflowStatus: 99}; the next turn is answered."""
    worker, turn = _one_turn(sidecar, client, background)
    carried = pb.HistoryEvent(eventId=-1)
    carried.executionCompleted.workflowStatus = 99
    worker.answer(turn, complete(1, "2", status=pb.ORCHESTRATION_STATUS_CONTINUED_AS_NEW, carryover=[carried]))
    try:
        worker.answer(worker.next_workflow())
    except grpc.RpcError as exc:
        pytest.fail(f"answering the carried-over turn -> {exc.code().name}: {exc.details()}")
    return worker


def test_regression_get_workflow_with_an_unknown_status_is_not_internal(sidecar, client, background) -> None:
    """GetWorkflowBeta1 names the runtime status; a status outside the enum must not make it INTERNAL."""
    worker = _carry_unknown_status(sidecar, client, background)
    with grpc.insecure_channel(sidecar.address) as channel:
        try:
            got = DaprWorkflowClient(channel).call("GetWorkflowBeta1", rt.GetWorkflowRequest(instance_id="r"),
                                                   timeout=10)
        except grpc.RpcError as exc:
            pytest.fail(f"GetWorkflowBeta1 on an instance whose status is 99 -> {exc.code().name}: {exc.details()}")
    assert got.runtime_status
    worker.cancel()


def test_regression_carryover_cannot_set_a_status_outside_the_enum(sidecar, client, background) -> None:
    """The engine refuses completeWorkflow actions with a non-final status (R3.13), but carryoverEvents
    are committed verbatim, so a worker can complete the instance with status 99 through them: the
    instance then reports a status outside OrchestrationStatus and no Wait* ever returns."""
    worker = _carry_unknown_status(sidecar, client, background)
    state = client.call("GetInstance", pb.GetInstanceRequest(instanceId="r"), timeout=10).workflowState
    assert state.workflowStatus in set(pb.OrchestrationStatus.values()), (
        f"GetInstance reports workflowStatus {state.workflowStatus}")
    worker.cancel()


@pytest.mark.parametrize("seconds,nanos", [(2**63 - 1, 2**31 - 1), (2**63 - 1, 999_999_999)])
def test_regression_extreme_scheduled_start_is_not_internal(sidecar, client, seconds, nanos) -> None:
    """A scheduledStartTimestamp at the end of int64 seconds is refused or accepted, never INTERNAL."""
    req = _start_req("far")
    req.scheduledStartTimestamp.seconds, req.scheduledStartTimestamp.nanos = seconds, nanos
    try:
        client.call("StartInstance", req, timeout=5)
    except grpc.RpcError as exc:
        assert exc.code() not in NEVER, f"StartInstance far in the future -> {exc.code().name}: {exc.details()}"
    client.call("Hello", empty_pb2.Empty(), timeout=5)


def test_regression_far_scheduled_start_with_a_sqlite_db(tmp_path, background) -> None:
    """StartInstance scheduled after year 2262 (ns beyond int64) on a file db: no INTERNAL, and
    memory and disk agree (the instance is either created durably or not at all)."""
    db = str(tmp_path / "far.db")
    srv = SidecarServer.start(port=0, db=db)
    channel = grpc.insecure_channel(srv.address)
    client = TaskHubClient(channel)
    try:
        req = _start_req("far")
        req.scheduledStartTimestamp.seconds = 2**40  # year ~36812
        try:
            client.call("StartInstance", req, timeout=5)
            created = True
        except grpc.RpcError as exc:
            assert exc.code() not in NEVER, f"StartInstance -> {exc.code().name}: {exc.details()}"
            created = False
        live = client.call("GetInstance", pb.GetInstanceRequest(instanceId="far"), timeout=5).exists
        assert live == created, f"StartInstance failed but the instance exists in memory (exists={live})"
    finally:
        channel.close()
        srv.stop()
    srv = SidecarServer.start(port=0, db=db)
    try:
        with grpc.insecure_channel(srv.address) as ch:
            again = TaskHubClient(ch).call("GetInstance", pb.GetInstanceRequest(instanceId="far"), timeout=5)
        assert again.exists == created, "the instance did not survive a restart the same way"
    finally:
        srv.stop()


def test_regression_far_detached_start_with_a_sqlite_db(tmp_path, background) -> None:
    """A CreateDetachedWorkflow action scheduled after year 2262 on a file db: the turn's RPC is OK
    (or the turn is abandoned), never INTERNAL; memory and history agree."""
    srv = SidecarServer.start(port=0, db=str(tmp_path / "det.db"))
    channel = grpc.insecure_channel(srv.address)
    client = TaskHubClient(channel)
    worker = RawWorker(srv.address)
    try:
        background.submit(client.call, "StartInstance", _start_req("p"), timeout=10)
        turn = worker.next_workflow()
        det = pb.WorkflowAction(id=1)
        det.createDetachedWorkflow.name = "D"
        det.createDetachedWorkflow.instanceId = "det"
        det.createDetachedWorkflow.scheduledStartTimestamp.seconds = 2**40
        try:
            worker.answer(turn, det)
        except grpc.RpcError as exc:
            pytest.fail(f"CompleteWorkflowTask with a far detached start -> {exc.code().name}: {exc.details()}")
        client.call("Hello", empty_pb2.Empty(), timeout=5)
    finally:
        worker.cancel()
        channel.close()
        srv.stop()


def test_actions_aimed_at_the_instance_itself(sidecar, client, background) -> None:
    """A child with the parent's own id, a message to itself and a recursive terminate of itself
    (shapes the storm produces): no crash, no loop, and the instance ends TERMINATED."""
    worker, turn = _one_turn(sidecar, client, background)
    me = pb.WorkflowAction(id=1)
    me.createChildWorkflow.name = "W"
    me.createChildWorkflow.instanceId = "r"
    send = pb.WorkflowAction(id=2)
    send.sendEvent.instance.instanceId = "r"
    send.sendEvent.name = "ping"
    term = pb.WorkflowAction(id=3)
    term.terminateWorkflow.instanceId = "r"
    term.terminateWorkflow.recurse = True
    worker.answer(turn, me, send, term)
    nxt = worker.next_workflow()
    worker.answer(nxt)
    done = client.call("WaitForInstanceCompletion", pb.GetInstanceRequest(instanceId="r"), timeout=10)
    assert done.workflowState.workflowStatus == pb.ORCHESTRATION_STATUS_TERMINATED
    client.call("PurgeInstances", pb.PurgeInstancesRequest(instanceId="r", recursive=True), timeout=10)
    assert not client.call("GetInstance", pb.GetInstanceRequest(instanceId="r"), timeout=10).exists
    worker.cancel()



def _raw_history(address: str, iid: str) -> bytes:
    """GetInstanceHistory's response exactly as the sidecar sent it (not parsed and re-serialised)."""
    with grpc.insecure_channel(address) as ch:
        call = ch.unary_unary(TASKHUB.method("GetInstanceHistory").path)
        return call(pb.GetInstanceHistoryRequest(instanceId=iid).SerializeToString(), timeout=CALL_TIMEOUT)


def test_regression_committed_event_bytes_are_the_same_after_a_restart(tmp_path: Path, background) -> None:
    """Found by test_fuzzed_state_survives_a_restart ("history event #1 bytes differ"): a map field
    (ExecutionStarted.tags) is written in hash-table order, which differs between the event as built
    from the request and the same event parsed back from the db (protobuf seeds its hash per process,
    so a few tags differ only sometimes; 64 tags differed in every one of 300 tries)."""
    db = str(tmp_path / "bytes.db")
    srv = SidecarServer.start(port=0, db=db)
    try:
        worker = RawWorker(srv.address)
        with grpc.insecure_channel(srv.address) as ch:
            req = _start_req("tagged")
            for i in range(64):
                req.tags[f"tag-{i}"] = "v"
            started = background.submit(TaskHubClient(ch).call, "StartInstance", req, timeout=CALL_TIMEOUT)
            worker.answer(worker.next_workflow(), complete(1, "done"))
            started.result(timeout=CALL_TIMEOUT)
        worker.cancel()
        before = _raw_history(srv.address, "tagged")
    finally:
        srv.stop()
    assert b"tag-63" in before, "the tags are not in the committed history; the test proves nothing"
    srv = SidecarServer.start(port=0, db=db)
    try:
        after = _raw_history(srv.address, "tagged")
    finally:
        srv.stop()
    assert after == before, "committed history bytes differ after a restart on the same SQLite db"
