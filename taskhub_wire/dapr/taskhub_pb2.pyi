import datetime

from google.protobuf import empty_pb2 as _empty_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf import wrappers_pb2 as _wrappers_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class OrchestrationStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ORCHESTRATION_STATUS_RUNNING: _ClassVar[OrchestrationStatus]
    ORCHESTRATION_STATUS_COMPLETED: _ClassVar[OrchestrationStatus]
    ORCHESTRATION_STATUS_CONTINUED_AS_NEW: _ClassVar[OrchestrationStatus]
    ORCHESTRATION_STATUS_FAILED: _ClassVar[OrchestrationStatus]
    ORCHESTRATION_STATUS_CANCELED: _ClassVar[OrchestrationStatus]
    ORCHESTRATION_STATUS_TERMINATED: _ClassVar[OrchestrationStatus]
    ORCHESTRATION_STATUS_PENDING: _ClassVar[OrchestrationStatus]
    ORCHESTRATION_STATUS_SUSPENDED: _ClassVar[OrchestrationStatus]
    ORCHESTRATION_STATUS_STALLED: _ClassVar[OrchestrationStatus]

class StalledReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PATCH_MISMATCH: _ClassVar[StalledReason]
    VERSION_NOT_AVAILABLE: _ClassVar[StalledReason]
    PAYLOAD_SIZE_EXCEEDED: _ClassVar[StalledReason]

class HistoryPropagationScope(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    HISTORY_PROPAGATION_SCOPE_NONE: _ClassVar[HistoryPropagationScope]
    HISTORY_PROPAGATION_SCOPE_OWN_HISTORY: _ClassVar[HistoryPropagationScope]
    HISTORY_PROPAGATION_SCOPE_LINEAGE: _ClassVar[HistoryPropagationScope]

class WorkerCapability(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    WORKER_CAPABILITY_UNSPECIFIED: _ClassVar[WorkerCapability]
    WORKER_CAPABILITY_STATEFUL_HISTORY: _ClassVar[WorkerCapability]

class TerminalStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TERMINAL_STATUS_UNSPECIFIED: _ClassVar[TerminalStatus]
    TERMINAL_STATUS_COMPLETED: _ClassVar[TerminalStatus]
    TERMINAL_STATUS_FAILED: _ClassVar[TerminalStatus]

class ActivityTerminalStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ACTIVITY_TERMINAL_STATUS_UNSPECIFIED: _ClassVar[ActivityTerminalStatus]
    ACTIVITY_TERMINAL_STATUS_COMPLETED: _ClassVar[ActivityTerminalStatus]
    ACTIVITY_TERMINAL_STATUS_FAILED: _ClassVar[ActivityTerminalStatus]
ORCHESTRATION_STATUS_RUNNING: OrchestrationStatus
ORCHESTRATION_STATUS_COMPLETED: OrchestrationStatus
ORCHESTRATION_STATUS_CONTINUED_AS_NEW: OrchestrationStatus
ORCHESTRATION_STATUS_FAILED: OrchestrationStatus
ORCHESTRATION_STATUS_CANCELED: OrchestrationStatus
ORCHESTRATION_STATUS_TERMINATED: OrchestrationStatus
ORCHESTRATION_STATUS_PENDING: OrchestrationStatus
ORCHESTRATION_STATUS_SUSPENDED: OrchestrationStatus
ORCHESTRATION_STATUS_STALLED: OrchestrationStatus
PATCH_MISMATCH: StalledReason
VERSION_NOT_AVAILABLE: StalledReason
PAYLOAD_SIZE_EXCEEDED: StalledReason
HISTORY_PROPAGATION_SCOPE_NONE: HistoryPropagationScope
HISTORY_PROPAGATION_SCOPE_OWN_HISTORY: HistoryPropagationScope
HISTORY_PROPAGATION_SCOPE_LINEAGE: HistoryPropagationScope
WORKER_CAPABILITY_UNSPECIFIED: WorkerCapability
WORKER_CAPABILITY_STATEFUL_HISTORY: WorkerCapability
TERMINAL_STATUS_UNSPECIFIED: TerminalStatus
TERMINAL_STATUS_COMPLETED: TerminalStatus
TERMINAL_STATUS_FAILED: TerminalStatus
ACTIVITY_TERMINAL_STATUS_UNSPECIFIED: ActivityTerminalStatus
ACTIVITY_TERMINAL_STATUS_COMPLETED: ActivityTerminalStatus
ACTIVITY_TERMINAL_STATUS_FAILED: ActivityTerminalStatus

class TaskRouter(_message.Message):
    __slots__ = ("sourceAppID", "targetAppID", "targetAppNamespace")
    SOURCEAPPID_FIELD_NUMBER: _ClassVar[int]
    TARGETAPPID_FIELD_NUMBER: _ClassVar[int]
    TARGETAPPNAMESPACE_FIELD_NUMBER: _ClassVar[int]
    sourceAppID: str
    targetAppID: str
    targetAppNamespace: str
    def __init__(self, sourceAppID: _Optional[str] = ..., targetAppID: _Optional[str] = ..., targetAppNamespace: _Optional[str] = ...) -> None: ...

class WorkflowVersion(_message.Message):
    __slots__ = ("patches", "name")
    PATCHES_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    patches: _containers.RepeatedScalarFieldContainer[str]
    name: str
    def __init__(self, patches: _Optional[_Iterable[str]] = ..., name: _Optional[str] = ...) -> None: ...

class WorkflowInstance(_message.Message):
    __slots__ = ("instanceId", "executionId")
    INSTANCEID_FIELD_NUMBER: _ClassVar[int]
    EXECUTIONID_FIELD_NUMBER: _ClassVar[int]
    instanceId: str
    executionId: _wrappers_pb2.StringValue
    def __init__(self, instanceId: _Optional[str] = ..., executionId: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ...) -> None: ...

class TaskFailureDetails(_message.Message):
    __slots__ = ("errorType", "errorMessage", "stackTrace", "innerFailure", "isNonRetriable")
    ERRORTYPE_FIELD_NUMBER: _ClassVar[int]
    ERRORMESSAGE_FIELD_NUMBER: _ClassVar[int]
    STACKTRACE_FIELD_NUMBER: _ClassVar[int]
    INNERFAILURE_FIELD_NUMBER: _ClassVar[int]
    ISNONRETRIABLE_FIELD_NUMBER: _ClassVar[int]
    errorType: str
    errorMessage: str
    stackTrace: _wrappers_pb2.StringValue
    innerFailure: TaskFailureDetails
    isNonRetriable: bool
    def __init__(self, errorType: _Optional[str] = ..., errorMessage: _Optional[str] = ..., stackTrace: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ..., innerFailure: _Optional[_Union[TaskFailureDetails, _Mapping]] = ..., isNonRetriable: _Optional[bool] = ...) -> None: ...

class ParentInstanceInfo(_message.Message):
    __slots__ = ("taskScheduledId", "name", "version", "workflowInstance", "appID", "appNamespace")
    TASKSCHEDULEDID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    WORKFLOWINSTANCE_FIELD_NUMBER: _ClassVar[int]
    APPID_FIELD_NUMBER: _ClassVar[int]
    APPNAMESPACE_FIELD_NUMBER: _ClassVar[int]
    taskScheduledId: int
    name: _wrappers_pb2.StringValue
    version: _wrappers_pb2.StringValue
    workflowInstance: WorkflowInstance
    appID: str
    appNamespace: str
    def __init__(self, taskScheduledId: _Optional[int] = ..., name: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ..., version: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ..., workflowInstance: _Optional[_Union[WorkflowInstance, _Mapping]] = ..., appID: _Optional[str] = ..., appNamespace: _Optional[str] = ...) -> None: ...

class RerunParentInstanceInfo(_message.Message):
    __slots__ = ("instanceID",)
    INSTANCEID_FIELD_NUMBER: _ClassVar[int]
    instanceID: str
    def __init__(self, instanceID: _Optional[str] = ...) -> None: ...

class RetryParentInstanceInfo(_message.Message):
    __slots__ = ("instanceID",)
    INSTANCEID_FIELD_NUMBER: _ClassVar[int]
    instanceID: str
    def __init__(self, instanceID: _Optional[str] = ...) -> None: ...

class TraceContext(_message.Message):
    __slots__ = ("traceParent", "spanID", "traceState")
    TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    SPANID_FIELD_NUMBER: _ClassVar[int]
    TRACESTATE_FIELD_NUMBER: _ClassVar[int]
    traceParent: str
    spanID: str
    traceState: _wrappers_pb2.StringValue
    def __init__(self, traceParent: _Optional[str] = ..., spanID: _Optional[str] = ..., traceState: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ...) -> None: ...

class WorkflowState(_message.Message):
    __slots__ = ("instanceId", "name", "version", "workflowStatus", "scheduledStartTimestamp", "createdTimestamp", "lastUpdatedTimestamp", "input", "output", "customStatus", "failureDetails", "executionId", "completedTimestamp", "parentInstanceId", "tags", "parentAppId", "startedAt")
    class TagsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    INSTANCEID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    WORKFLOWSTATUS_FIELD_NUMBER: _ClassVar[int]
    SCHEDULEDSTARTTIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    CREATEDTIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    LASTUPDATEDTIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    CUSTOMSTATUS_FIELD_NUMBER: _ClassVar[int]
    FAILUREDETAILS_FIELD_NUMBER: _ClassVar[int]
    EXECUTIONID_FIELD_NUMBER: _ClassVar[int]
    COMPLETEDTIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    PARENTINSTANCEID_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    PARENTAPPID_FIELD_NUMBER: _ClassVar[int]
    STARTEDAT_FIELD_NUMBER: _ClassVar[int]
    instanceId: str
    name: str
    version: _wrappers_pb2.StringValue
    workflowStatus: OrchestrationStatus
    scheduledStartTimestamp: _timestamp_pb2.Timestamp
    createdTimestamp: _timestamp_pb2.Timestamp
    lastUpdatedTimestamp: _timestamp_pb2.Timestamp
    input: _wrappers_pb2.StringValue
    output: _wrappers_pb2.StringValue
    customStatus: _wrappers_pb2.StringValue
    failureDetails: TaskFailureDetails
    executionId: _wrappers_pb2.StringValue
    completedTimestamp: _timestamp_pb2.Timestamp
    parentInstanceId: _wrappers_pb2.StringValue
    tags: _containers.ScalarMap[str, str]
    parentAppId: _wrappers_pb2.StringValue
    startedAt: _timestamp_pb2.Timestamp
    def __init__(self, instanceId: _Optional[str] = ..., name: _Optional[str] = ..., version: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ..., workflowStatus: _Optional[_Union[OrchestrationStatus, str]] = ..., scheduledStartTimestamp: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., createdTimestamp: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., lastUpdatedTimestamp: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., input: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ..., output: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ..., customStatus: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ..., failureDetails: _Optional[_Union[TaskFailureDetails, _Mapping]] = ..., executionId: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ..., completedTimestamp: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., parentInstanceId: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ..., tags: _Optional[_Mapping[str, str]] = ..., parentAppId: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ..., startedAt: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ChildCompletionAttestationPayload(_message.Message):
    __slots__ = ("parentInstanceId", "parentTaskScheduledId", "ioDigest", "signerCertDigest", "terminalStatus", "canonicalSpecVersion")
    PARENTINSTANCEID_FIELD_NUMBER: _ClassVar[int]
    PARENTTASKSCHEDULEDID_FIELD_NUMBER: _ClassVar[int]
    IODIGEST_FIELD_NUMBER: _ClassVar[int]
    SIGNERCERTDIGEST_FIELD_NUMBER: _ClassVar[int]
    TERMINALSTATUS_FIELD_NUMBER: _ClassVar[int]
    CANONICALSPECVERSION_FIELD_NUMBER: _ClassVar[int]
    parentInstanceId: str
    parentTaskScheduledId: int
    ioDigest: bytes
    signerCertDigest: bytes
    terminalStatus: TerminalStatus
    canonicalSpecVersion: int
    def __init__(self, parentInstanceId: _Optional[str] = ..., parentTaskScheduledId: _Optional[int] = ..., ioDigest: _Optional[bytes] = ..., signerCertDigest: _Optional[bytes] = ..., terminalStatus: _Optional[_Union[TerminalStatus, str]] = ..., canonicalSpecVersion: _Optional[int] = ...) -> None: ...

class ChildCompletionAttestation(_message.Message):
    __slots__ = ("payload", "signature")
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    payload: bytes
    signature: bytes
    def __init__(self, payload: _Optional[bytes] = ..., signature: _Optional[bytes] = ...) -> None: ...

class ActivityCompletionAttestationPayload(_message.Message):
    __slots__ = ("parentInstanceId", "parentTaskScheduledId", "activityName", "ioDigest", "signerCertDigest", "terminalStatus", "canonicalSpecVersion")
    PARENTINSTANCEID_FIELD_NUMBER: _ClassVar[int]
    PARENTTASKSCHEDULEDID_FIELD_NUMBER: _ClassVar[int]
    ACTIVITYNAME_FIELD_NUMBER: _ClassVar[int]
    IODIGEST_FIELD_NUMBER: _ClassVar[int]
    SIGNERCERTDIGEST_FIELD_NUMBER: _ClassVar[int]
    TERMINALSTATUS_FIELD_NUMBER: _ClassVar[int]
    CANONICALSPECVERSION_FIELD_NUMBER: _ClassVar[int]
    parentInstanceId: str
    parentTaskScheduledId: int
    activityName: str
    ioDigest: bytes
    signerCertDigest: bytes
    terminalStatus: ActivityTerminalStatus
    canonicalSpecVersion: int
    def __init__(self, parentInstanceId: _Optional[str] = ..., parentTaskScheduledId: _Optional[int] = ..., activityName: _Optional[str] = ..., ioDigest: _Optional[bytes] = ..., signerCertDigest: _Optional[bytes] = ..., terminalStatus: _Optional[_Union[ActivityTerminalStatus, str]] = ..., canonicalSpecVersion: _Optional[int] = ...) -> None: ...

class ActivityCompletionAttestation(_message.Message):
    __slots__ = ("payload", "signature")
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    payload: bytes
    signature: bytes
    def __init__(self, payload: _Optional[bytes] = ..., signature: _Optional[bytes] = ...) -> None: ...

class ExternalSigningCertificate(_message.Message):
    __slots__ = ("digest", "certificate")
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    CERTIFICATE_FIELD_NUMBER: _ClassVar[int]
    digest: bytes
    certificate: bytes
    def __init__(self, digest: _Optional[bytes] = ..., certificate: _Optional[bytes] = ...) -> None: ...

class PropagatedHistoryChunk(_message.Message):
    __slots__ = ("rawEvents", "appId", "instanceId", "workflowName", "rawSignatures", "signingCertChains")
    RAWEVENTS_FIELD_NUMBER: _ClassVar[int]
    APPID_FIELD_NUMBER: _ClassVar[int]
    INSTANCEID_FIELD_NUMBER: _ClassVar[int]
    WORKFLOWNAME_FIELD_NUMBER: _ClassVar[int]
    RAWSIGNATURES_FIELD_NUMBER: _ClassVar[int]
    SIGNINGCERTCHAINS_FIELD_NUMBER: _ClassVar[int]
    rawEvents: _containers.RepeatedScalarFieldContainer[bytes]
    appId: str
    instanceId: str
    workflowName: str
    rawSignatures: _containers.RepeatedScalarFieldContainer[bytes]
    signingCertChains: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, rawEvents: _Optional[_Iterable[bytes]] = ..., appId: _Optional[str] = ..., instanceId: _Optional[str] = ..., workflowName: _Optional[str] = ..., rawSignatures: _Optional[_Iterable[bytes]] = ..., signingCertChains: _Optional[_Iterable[bytes]] = ...) -> None: ...

class PropagatedHistory(_message.Message):
    __slots__ = ("scope", "chunks")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    scope: HistoryPropagationScope
    chunks: _containers.RepeatedCompositeFieldContainer[PropagatedHistoryChunk]
    def __init__(self, scope: _Optional[_Union[HistoryPropagationScope, str]] = ..., chunks: _Optional[_Iterable[_Union[PropagatedHistoryChunk, _Mapping]]] = ...) -> None: ...

class ExecutionStartedEvent(_message.Message):
    __slots__ = ("name", "version", "input", "workflowInstance", "parentInstance", "scheduledStartTimestamp", "parentTraceContext", "workflowSpanID", "tags")
    class TagsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    WORKFLOWINSTANCE_FIELD_NUMBER: _ClassVar[int]
    PARENTINSTANCE_FIELD_NUMBER: _ClassVar[int]
    SCHEDULEDSTARTTIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    PARENTTRACECONTEXT_FIELD_NUMBER: _ClassVar[int]
    WORKFLOWSPANID_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: _wrappers_pb2.StringValue
    input: _wrappers_pb2.StringValue
    workflowInstance: WorkflowInstance
    parentInstance: ParentInstanceInfo
    scheduledStartTimestamp: _timestamp_pb2.Timestamp
    parentTraceContext: TraceContext
    workflowSpanID: _wrappers_pb2.StringValue
    tags: _containers.ScalarMap[str, str]
    def __init__(self, name: _Optional[str] = ..., version: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ..., input: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ..., workflowInstance: _Optional[_Union[WorkflowInstance, _Mapping]] = ..., parentInstance: _Optional[_Union[ParentInstanceInfo, _Mapping]] = ..., scheduledStartTimestamp: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., parentTraceContext: _Optional[_Union[TraceContext, _Mapping]] = ..., workflowSpanID: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ..., tags: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ExecutionCompletedEvent(_message.Message):
    __slots__ = ("workflowStatus", "result", "failureDetails")
    WORKFLOWSTATUS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    FAILUREDETAILS_FIELD_NUMBER: _ClassVar[int]
    workflowStatus: OrchestrationStatus
    result: _wrappers_pb2.StringValue
    failureDetails: TaskFailureDetails
    def __init__(self, workflowStatus: _Optional[_Union[OrchestrationStatus, str]] = ..., result: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ..., failureDetails: _Optional[_Union[TaskFailureDetails, _Mapping]] = ...) -> None: ...

class ExecutionTerminatedEvent(_message.Message):
    __slots__ = ("input", "recurse")
    INPUT_FIELD_NUMBER: _ClassVar[int]
    RECURSE_FIELD_NUMBER: _ClassVar[int]
    input: _wrappers_pb2.StringValue
    recurse: bool
    def __init__(self, input: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ..., recurse: _Optional[bool] = ...) -> None: ...

class TaskScheduledEvent(_message.Message):
    __slots__ = ("name", "version", "input", "parentTraceContext", "taskExecutionId", "rerunParentInstanceInfo", "historyPropagationScope")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    PARENTTRACECONTEXT_FIELD_NUMBER: _ClassVar[int]
    TASKEXECUTIONID_FIELD_NUMBER: _ClassVar[int]
    RERUNPARENTINSTANCEINFO_FIELD_NUMBER: _ClassVar[int]
    HISTORYPROPAGATIONSCOPE_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: _wrappers_pb2.StringValue
    input: _wrappers_pb2.StringValue
    parentTraceContext: TraceContext
    taskExecutionId: str
    rerunParentInstanceInfo: RerunParentInstanceInfo
    historyPropagationScope: HistoryPropagationScope
    def __init__(self, name: _Optional[str] = ..., version: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ..., input: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ..., parentTraceContext: _Optional[_Union[TraceContext, _Mapping]] = ..., taskExecutionId: _Optional[str] = ..., rerunParentInstanceInfo: _Optional[_Union[RerunParentInstanceInfo, _Mapping]] = ..., historyPropagationScope: _Optional[_Union[HistoryPropagationScope, str]] = ...) -> None: ...

class TaskCompletedEvent(_message.Message):
    __slots__ = ("taskScheduledId", "result", "taskExecutionId", "attestation", "signerCertificate")
    TASKSCHEDULEDID_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    TASKEXECUTIONID_FIELD_NUMBER: _ClassVar[int]
    ATTESTATION_FIELD_NUMBER: _ClassVar[int]
    SIGNERCERTIFICATE_FIELD_NUMBER: _ClassVar[int]
    taskScheduledId: int
    result: _wrappers_pb2.StringValue
    taskExecutionId: str
    attestation: ActivityCompletionAttestation
    signerCertificate: bytes
    def __init__(self, taskScheduledId: _Optional[int] = ..., result: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ..., taskExecutionId: _Optional[str] = ..., attestation: _Optional[_Union[ActivityCompletionAttestation, _Mapping]] = ..., signerCertificate: _Optional[bytes] = ...) -> None: ...

class TaskFailedEvent(_message.Message):
    __slots__ = ("taskScheduledId", "failureDetails", "taskExecutionId", "attestation", "signerCertificate")
    TASKSCHEDULEDID_FIELD_NUMBER: _ClassVar[int]
    FAILUREDETAILS_FIELD_NUMBER: _ClassVar[int]
    TASKEXECUTIONID_FIELD_NUMBER: _ClassVar[int]
    ATTESTATION_FIELD_NUMBER: _ClassVar[int]
    SIGNERCERTIFICATE_FIELD_NUMBER: _ClassVar[int]
    taskScheduledId: int
    failureDetails: TaskFailureDetails
    taskExecutionId: str
    attestation: ActivityCompletionAttestation
    signerCertificate: bytes
    def __init__(self, taskScheduledId: _Optional[int] = ..., failureDetails: _Optional[_Union[TaskFailureDetails, _Mapping]] = ..., taskExecutionId: _Optional[str] = ..., attestation: _Optional[_Union[ActivityCompletionAttestation, _Mapping]] = ..., signerCertificate: _Optional[bytes] = ...) -> None: ...

class ChildWorkflowInstanceCreatedEvent(_message.Message):
    __slots__ = ("instanceId", "name", "version", "input", "parentTraceContext", "rerunParentInstanceInfo", "historyPropagationScope", "retryParentInstanceInfo")
    INSTANCEID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    PARENTTRACECONTEXT_FIELD_NUMBER: _ClassVar[int]
    RERUNPARENTINSTANCEINFO_FIELD_NUMBER: _ClassVar[int]
    HISTORYPROPAGATIONSCOPE_FIELD_NUMBER: _ClassVar[int]
    RETRYPARENTINSTANCEINFO_FIELD_NUMBER: _ClassVar[int]
    instanceId: str
    name: str
    version: _wrappers_pb2.StringValue
    input: _wrappers_pb2.StringValue
    parentTraceContext: TraceContext
    rerunParentInstanceInfo: RerunParentInstanceInfo
    historyPropagationScope: HistoryPropagationScope
    retryParentInstanceInfo: RetryParentInstanceInfo
    def __init__(self, instanceId: _Optional[str] = ..., name: _Optional[str] = ..., version: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ..., input: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ..., parentTraceContext: _Optional[_Union[TraceContext, _Mapping]] = ..., rerunParentInstanceInfo: _Optional[_Union[RerunParentInstanceInfo, _Mapping]] = ..., historyPropagationScope: _Optional[_Union[HistoryPropagationScope, str]] = ..., retryParentInstanceInfo: _Optional[_Union[RetryParentInstanceInfo, _Mapping]] = ...) -> None: ...

class ChildWorkflowInstanceCompletedEvent(_message.Message):
    __slots__ = ("taskScheduledId", "result", "attestation", "signerCertificate")
    TASKSCHEDULEDID_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    ATTESTATION_FIELD_NUMBER: _ClassVar[int]
    SIGNERCERTIFICATE_FIELD_NUMBER: _ClassVar[int]
    taskScheduledId: int
    result: _wrappers_pb2.StringValue
    attestation: ChildCompletionAttestation
    signerCertificate: bytes
    def __init__(self, taskScheduledId: _Optional[int] = ..., result: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ..., attestation: _Optional[_Union[ChildCompletionAttestation, _Mapping]] = ..., signerCertificate: _Optional[bytes] = ...) -> None: ...

class ChildWorkflowInstanceFailedEvent(_message.Message):
    __slots__ = ("taskScheduledId", "failureDetails", "attestation", "signerCertificate")
    TASKSCHEDULEDID_FIELD_NUMBER: _ClassVar[int]
    FAILUREDETAILS_FIELD_NUMBER: _ClassVar[int]
    ATTESTATION_FIELD_NUMBER: _ClassVar[int]
    SIGNERCERTIFICATE_FIELD_NUMBER: _ClassVar[int]
    taskScheduledId: int
    failureDetails: TaskFailureDetails
    attestation: ChildCompletionAttestation
    signerCertificate: bytes
    def __init__(self, taskScheduledId: _Optional[int] = ..., failureDetails: _Optional[_Union[TaskFailureDetails, _Mapping]] = ..., attestation: _Optional[_Union[ChildCompletionAttestation, _Mapping]] = ..., signerCertificate: _Optional[bytes] = ...) -> None: ...

class DetachedWorkflowInstanceCreatedEvent(_message.Message):
    __slots__ = ("instanceId",)
    INSTANCEID_FIELD_NUMBER: _ClassVar[int]
    instanceId: str
    def __init__(self, instanceId: _Optional[str] = ...) -> None: ...

class TimerOriginCreateTimer(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class TimerOriginExternalEvent(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class TimerOriginActivityRetry(_message.Message):
    __slots__ = ("taskExecutionId",)
    TASKEXECUTIONID_FIELD_NUMBER: _ClassVar[int]
    taskExecutionId: str
    def __init__(self, taskExecutionId: _Optional[str] = ...) -> None: ...

class TimerOriginChildWorkflowRetry(_message.Message):
    __slots__ = ("instanceId",)
    INSTANCEID_FIELD_NUMBER: _ClassVar[int]
    instanceId: str
    def __init__(self, instanceId: _Optional[str] = ...) -> None: ...

class TimerCreatedEvent(_message.Message):
    __slots__ = ("fireAt", "name", "rerunParentInstanceInfo", "createTimer", "externalEvent", "activityRetry", "childWorkflowRetry")
    FIREAT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    RERUNPARENTINSTANCEINFO_FIELD_NUMBER: _ClassVar[int]
    CREATETIMER_FIELD_NUMBER: _ClassVar[int]
    EXTERNALEVENT_FIELD_NUMBER: _ClassVar[int]
    ACTIVITYRETRY_FIELD_NUMBER: _ClassVar[int]
    CHILDWORKFLOWRETRY_FIELD_NUMBER: _ClassVar[int]
    fireAt: _timestamp_pb2.Timestamp
    name: str
    rerunParentInstanceInfo: RerunParentInstanceInfo
    createTimer: TimerOriginCreateTimer
    externalEvent: TimerOriginExternalEvent
    activityRetry: TimerOriginActivityRetry
    childWorkflowRetry: TimerOriginChildWorkflowRetry
    def __init__(self, fireAt: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., name: _Optional[str] = ..., rerunParentInstanceInfo: _Optional[_Union[RerunParentInstanceInfo, _Mapping]] = ..., createTimer: _Optional[_Union[TimerOriginCreateTimer, _Mapping]] = ..., externalEvent: _Optional[_Union[TimerOriginExternalEvent, _Mapping]] = ..., activityRetry: _Optional[_Union[TimerOriginActivityRetry, _Mapping]] = ..., childWorkflowRetry: _Optional[_Union[TimerOriginChildWorkflowRetry, _Mapping]] = ...) -> None: ...

class TimerFiredEvent(_message.Message):
    __slots__ = ("fireAt", "timerId")
    FIREAT_FIELD_NUMBER: _ClassVar[int]
    TIMERID_FIELD_NUMBER: _ClassVar[int]
    fireAt: _timestamp_pb2.Timestamp
    timerId: int
    def __init__(self, fireAt: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., timerId: _Optional[int] = ...) -> None: ...

class WorkflowStartedEvent(_message.Message):
    __slots__ = ("version",)
    VERSION_FIELD_NUMBER: _ClassVar[int]
    version: WorkflowVersion
    def __init__(self, version: _Optional[_Union[WorkflowVersion, _Mapping]] = ...) -> None: ...

class WorkflowCompletedEvent(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class EventSentEvent(_message.Message):
    __slots__ = ("instanceId", "name", "input")
    INSTANCEID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    instanceId: str
    name: str
    input: _wrappers_pb2.StringValue
    def __init__(self, instanceId: _Optional[str] = ..., name: _Optional[str] = ..., input: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ...) -> None: ...

class EventRaisedEvent(_message.Message):
    __slots__ = ("name", "input")
    NAME_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    name: str
    input: _wrappers_pb2.StringValue
    def __init__(self, name: _Optional[str] = ..., input: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ...) -> None: ...

class ContinueAsNewEvent(_message.Message):
    __slots__ = ("input",)
    INPUT_FIELD_NUMBER: _ClassVar[int]
    input: _wrappers_pb2.StringValue
    def __init__(self, input: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ...) -> None: ...

class ExecutionSuspendedEvent(_message.Message):
    __slots__ = ("input",)
    INPUT_FIELD_NUMBER: _ClassVar[int]
    input: _wrappers_pb2.StringValue
    def __init__(self, input: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ...) -> None: ...

class ExecutionResumedEvent(_message.Message):
    __slots__ = ("input",)
    INPUT_FIELD_NUMBER: _ClassVar[int]
    input: _wrappers_pb2.StringValue
    def __init__(self, input: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ...) -> None: ...

class ExecutionStalledEvent(_message.Message):
    __slots__ = ("reason", "description")
    REASON_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    reason: StalledReason
    description: str
    def __init__(self, reason: _Optional[_Union[StalledReason, str]] = ..., description: _Optional[str] = ...) -> None: ...

class HistoryEvent(_message.Message):
    __slots__ = ("eventId", "timestamp", "executionStarted", "executionCompleted", "executionTerminated", "taskScheduled", "taskCompleted", "taskFailed", "childWorkflowInstanceCreated", "childWorkflowInstanceCompleted", "childWorkflowInstanceFailed", "timerCreated", "timerFired", "workflowStarted", "workflowCompleted", "eventSent", "eventRaised", "continueAsNew", "executionSuspended", "executionResumed", "executionStalled", "detachedWorkflowInstanceCreated", "router")
    EVENTID_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    EXECUTIONSTARTED_FIELD_NUMBER: _ClassVar[int]
    EXECUTIONCOMPLETED_FIELD_NUMBER: _ClassVar[int]
    EXECUTIONTERMINATED_FIELD_NUMBER: _ClassVar[int]
    TASKSCHEDULED_FIELD_NUMBER: _ClassVar[int]
    TASKCOMPLETED_FIELD_NUMBER: _ClassVar[int]
    TASKFAILED_FIELD_NUMBER: _ClassVar[int]
    CHILDWORKFLOWINSTANCECREATED_FIELD_NUMBER: _ClassVar[int]
    CHILDWORKFLOWINSTANCECOMPLETED_FIELD_NUMBER: _ClassVar[int]
    CHILDWORKFLOWINSTANCEFAILED_FIELD_NUMBER: _ClassVar[int]
    TIMERCREATED_FIELD_NUMBER: _ClassVar[int]
    TIMERFIRED_FIELD_NUMBER: _ClassVar[int]
    WORKFLOWSTARTED_FIELD_NUMBER: _ClassVar[int]
    WORKFLOWCOMPLETED_FIELD_NUMBER: _ClassVar[int]
    EVENTSENT_FIELD_NUMBER: _ClassVar[int]
    EVENTRAISED_FIELD_NUMBER: _ClassVar[int]
    CONTINUEASNEW_FIELD_NUMBER: _ClassVar[int]
    EXECUTIONSUSPENDED_FIELD_NUMBER: _ClassVar[int]
    EXECUTIONRESUMED_FIELD_NUMBER: _ClassVar[int]
    EXECUTIONSTALLED_FIELD_NUMBER: _ClassVar[int]
    DETACHEDWORKFLOWINSTANCECREATED_FIELD_NUMBER: _ClassVar[int]
    ROUTER_FIELD_NUMBER: _ClassVar[int]
    eventId: int
    timestamp: _timestamp_pb2.Timestamp
    executionStarted: ExecutionStartedEvent
    executionCompleted: ExecutionCompletedEvent
    executionTerminated: ExecutionTerminatedEvent
    taskScheduled: TaskScheduledEvent
    taskCompleted: TaskCompletedEvent
    taskFailed: TaskFailedEvent
    childWorkflowInstanceCreated: ChildWorkflowInstanceCreatedEvent
    childWorkflowInstanceCompleted: ChildWorkflowInstanceCompletedEvent
    childWorkflowInstanceFailed: ChildWorkflowInstanceFailedEvent
    timerCreated: TimerCreatedEvent
    timerFired: TimerFiredEvent
    workflowStarted: WorkflowStartedEvent
    workflowCompleted: WorkflowCompletedEvent
    eventSent: EventSentEvent
    eventRaised: EventRaisedEvent
    continueAsNew: ContinueAsNewEvent
    executionSuspended: ExecutionSuspendedEvent
    executionResumed: ExecutionResumedEvent
    executionStalled: ExecutionStalledEvent
    detachedWorkflowInstanceCreated: DetachedWorkflowInstanceCreatedEvent
    router: TaskRouter
    def __init__(self, eventId: _Optional[int] = ..., timestamp: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., executionStarted: _Optional[_Union[ExecutionStartedEvent, _Mapping]] = ..., executionCompleted: _Optional[_Union[ExecutionCompletedEvent, _Mapping]] = ..., executionTerminated: _Optional[_Union[ExecutionTerminatedEvent, _Mapping]] = ..., taskScheduled: _Optional[_Union[TaskScheduledEvent, _Mapping]] = ..., taskCompleted: _Optional[_Union[TaskCompletedEvent, _Mapping]] = ..., taskFailed: _Optional[_Union[TaskFailedEvent, _Mapping]] = ..., childWorkflowInstanceCreated: _Optional[_Union[ChildWorkflowInstanceCreatedEvent, _Mapping]] = ..., childWorkflowInstanceCompleted: _Optional[_Union[ChildWorkflowInstanceCompletedEvent, _Mapping]] = ..., childWorkflowInstanceFailed: _Optional[_Union[ChildWorkflowInstanceFailedEvent, _Mapping]] = ..., timerCreated: _Optional[_Union[TimerCreatedEvent, _Mapping]] = ..., timerFired: _Optional[_Union[TimerFiredEvent, _Mapping]] = ..., workflowStarted: _Optional[_Union[WorkflowStartedEvent, _Mapping]] = ..., workflowCompleted: _Optional[_Union[WorkflowCompletedEvent, _Mapping]] = ..., eventSent: _Optional[_Union[EventSentEvent, _Mapping]] = ..., eventRaised: _Optional[_Union[EventRaisedEvent, _Mapping]] = ..., continueAsNew: _Optional[_Union[ContinueAsNewEvent, _Mapping]] = ..., executionSuspended: _Optional[_Union[ExecutionSuspendedEvent, _Mapping]] = ..., executionResumed: _Optional[_Union[ExecutionResumedEvent, _Mapping]] = ..., executionStalled: _Optional[_Union[ExecutionStalledEvent, _Mapping]] = ..., detachedWorkflowInstanceCreated: _Optional[_Union[DetachedWorkflowInstanceCreatedEvent, _Mapping]] = ..., router: _Optional[_Union[TaskRouter, _Mapping]] = ...) -> None: ...

class ScheduleTaskAction(_message.Message):
    __slots__ = ("name", "version", "input", "taskExecutionId", "historyPropagationScope")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    TASKEXECUTIONID_FIELD_NUMBER: _ClassVar[int]
    HISTORYPROPAGATIONSCOPE_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: _wrappers_pb2.StringValue
    input: _wrappers_pb2.StringValue
    taskExecutionId: str
    historyPropagationScope: HistoryPropagationScope
    def __init__(self, name: _Optional[str] = ..., version: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ..., input: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ..., taskExecutionId: _Optional[str] = ..., historyPropagationScope: _Optional[_Union[HistoryPropagationScope, str]] = ...) -> None: ...

class CreateChildWorkflowAction(_message.Message):
    __slots__ = ("instanceId", "name", "version", "input", "historyPropagationScope", "retryParentInstanceInfo")
    INSTANCEID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    HISTORYPROPAGATIONSCOPE_FIELD_NUMBER: _ClassVar[int]
    RETRYPARENTINSTANCEINFO_FIELD_NUMBER: _ClassVar[int]
    instanceId: str
    name: str
    version: _wrappers_pb2.StringValue
    input: _wrappers_pb2.StringValue
    historyPropagationScope: HistoryPropagationScope
    retryParentInstanceInfo: RetryParentInstanceInfo
    def __init__(self, instanceId: _Optional[str] = ..., name: _Optional[str] = ..., version: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ..., input: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ..., historyPropagationScope: _Optional[_Union[HistoryPropagationScope, str]] = ..., retryParentInstanceInfo: _Optional[_Union[RetryParentInstanceInfo, _Mapping]] = ...) -> None: ...

class CreateTimerAction(_message.Message):
    __slots__ = ("fireAt", "name", "createTimer", "externalEvent", "activityRetry", "childWorkflowRetry")
    FIREAT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    CREATETIMER_FIELD_NUMBER: _ClassVar[int]
    EXTERNALEVENT_FIELD_NUMBER: _ClassVar[int]
    ACTIVITYRETRY_FIELD_NUMBER: _ClassVar[int]
    CHILDWORKFLOWRETRY_FIELD_NUMBER: _ClassVar[int]
    fireAt: _timestamp_pb2.Timestamp
    name: str
    createTimer: TimerOriginCreateTimer
    externalEvent: TimerOriginExternalEvent
    activityRetry: TimerOriginActivityRetry
    childWorkflowRetry: TimerOriginChildWorkflowRetry
    def __init__(self, fireAt: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., name: _Optional[str] = ..., createTimer: _Optional[_Union[TimerOriginCreateTimer, _Mapping]] = ..., externalEvent: _Optional[_Union[TimerOriginExternalEvent, _Mapping]] = ..., activityRetry: _Optional[_Union[TimerOriginActivityRetry, _Mapping]] = ..., childWorkflowRetry: _Optional[_Union[TimerOriginChildWorkflowRetry, _Mapping]] = ...) -> None: ...

class SendEventAction(_message.Message):
    __slots__ = ("instance", "name", "data")
    INSTANCE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    instance: WorkflowInstance
    name: str
    data: _wrappers_pb2.StringValue
    def __init__(self, instance: _Optional[_Union[WorkflowInstance, _Mapping]] = ..., name: _Optional[str] = ..., data: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ...) -> None: ...

class CompleteWorkflowAction(_message.Message):
    __slots__ = ("workflowStatus", "result", "details", "newVersion", "carryoverEvents", "failureDetails")
    WORKFLOWSTATUS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    NEWVERSION_FIELD_NUMBER: _ClassVar[int]
    CARRYOVEREVENTS_FIELD_NUMBER: _ClassVar[int]
    FAILUREDETAILS_FIELD_NUMBER: _ClassVar[int]
    workflowStatus: OrchestrationStatus
    result: _wrappers_pb2.StringValue
    details: _wrappers_pb2.StringValue
    newVersion: _wrappers_pb2.StringValue
    carryoverEvents: _containers.RepeatedCompositeFieldContainer[HistoryEvent]
    failureDetails: TaskFailureDetails
    def __init__(self, workflowStatus: _Optional[_Union[OrchestrationStatus, str]] = ..., result: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ..., details: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ..., newVersion: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ..., carryoverEvents: _Optional[_Iterable[_Union[HistoryEvent, _Mapping]]] = ..., failureDetails: _Optional[_Union[TaskFailureDetails, _Mapping]] = ...) -> None: ...

class TerminateWorkflowAction(_message.Message):
    __slots__ = ("instanceId", "reason", "recurse")
    INSTANCEID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    RECURSE_FIELD_NUMBER: _ClassVar[int]
    instanceId: str
    reason: _wrappers_pb2.StringValue
    recurse: bool
    def __init__(self, instanceId: _Optional[str] = ..., reason: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ..., recurse: _Optional[bool] = ...) -> None: ...

class WorkflowVersionNotAvailableAction(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CreateDetachedWorkflowAction(_message.Message):
    __slots__ = ("instanceId", "name", "version", "input", "scheduledStartTimestamp", "executionId", "tags", "parentTraceContext")
    class TagsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    INSTANCEID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    SCHEDULEDSTARTTIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    EXECUTIONID_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    PARENTTRACECONTEXT_FIELD_NUMBER: _ClassVar[int]
    instanceId: str
    name: str
    version: _wrappers_pb2.StringValue
    input: _wrappers_pb2.StringValue
    scheduledStartTimestamp: _timestamp_pb2.Timestamp
    executionId: _wrappers_pb2.StringValue
    tags: _containers.ScalarMap[str, str]
    parentTraceContext: TraceContext
    def __init__(self, instanceId: _Optional[str] = ..., name: _Optional[str] = ..., version: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ..., input: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ..., scheduledStartTimestamp: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., executionId: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ..., tags: _Optional[_Mapping[str, str]] = ..., parentTraceContext: _Optional[_Union[TraceContext, _Mapping]] = ...) -> None: ...

class WorkflowAction(_message.Message):
    __slots__ = ("id", "scheduleTask", "createChildWorkflow", "createTimer", "sendEvent", "completeWorkflow", "terminateWorkflow", "workflowVersionNotAvailable", "createDetachedWorkflow", "router")
    ID_FIELD_NUMBER: _ClassVar[int]
    SCHEDULETASK_FIELD_NUMBER: _ClassVar[int]
    CREATECHILDWORKFLOW_FIELD_NUMBER: _ClassVar[int]
    CREATETIMER_FIELD_NUMBER: _ClassVar[int]
    SENDEVENT_FIELD_NUMBER: _ClassVar[int]
    COMPLETEWORKFLOW_FIELD_NUMBER: _ClassVar[int]
    TERMINATEWORKFLOW_FIELD_NUMBER: _ClassVar[int]
    WORKFLOWVERSIONNOTAVAILABLE_FIELD_NUMBER: _ClassVar[int]
    CREATEDETACHEDWORKFLOW_FIELD_NUMBER: _ClassVar[int]
    ROUTER_FIELD_NUMBER: _ClassVar[int]
    id: int
    scheduleTask: ScheduleTaskAction
    createChildWorkflow: CreateChildWorkflowAction
    createTimer: CreateTimerAction
    sendEvent: SendEventAction
    completeWorkflow: CompleteWorkflowAction
    terminateWorkflow: TerminateWorkflowAction
    workflowVersionNotAvailable: WorkflowVersionNotAvailableAction
    createDetachedWorkflow: CreateDetachedWorkflowAction
    router: TaskRouter
    def __init__(self, id: _Optional[int] = ..., scheduleTask: _Optional[_Union[ScheduleTaskAction, _Mapping]] = ..., createChildWorkflow: _Optional[_Union[CreateChildWorkflowAction, _Mapping]] = ..., createTimer: _Optional[_Union[CreateTimerAction, _Mapping]] = ..., sendEvent: _Optional[_Union[SendEventAction, _Mapping]] = ..., completeWorkflow: _Optional[_Union[CompleteWorkflowAction, _Mapping]] = ..., terminateWorkflow: _Optional[_Union[TerminateWorkflowAction, _Mapping]] = ..., workflowVersionNotAvailable: _Optional[_Union[WorkflowVersionNotAvailableAction, _Mapping]] = ..., createDetachedWorkflow: _Optional[_Union[CreateDetachedWorkflowAction, _Mapping]] = ..., router: _Optional[_Union[TaskRouter, _Mapping]] = ...) -> None: ...

class GetWorkItemsRequest(_message.Message):
    __slots__ = ("capabilities",)
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    capabilities: _containers.RepeatedScalarFieldContainer[WorkerCapability]
    def __init__(self, capabilities: _Optional[_Iterable[_Union[WorkerCapability, str]]] = ...) -> None: ...

class WorkItem(_message.Message):
    __slots__ = ("workflowRequest", "activityRequest", "completionToken")
    WORKFLOWREQUEST_FIELD_NUMBER: _ClassVar[int]
    ACTIVITYREQUEST_FIELD_NUMBER: _ClassVar[int]
    COMPLETIONTOKEN_FIELD_NUMBER: _ClassVar[int]
    workflowRequest: WorkflowRequest
    activityRequest: ActivityRequest
    completionToken: str
    def __init__(self, workflowRequest: _Optional[_Union[WorkflowRequest, _Mapping]] = ..., activityRequest: _Optional[_Union[ActivityRequest, _Mapping]] = ..., completionToken: _Optional[str] = ...) -> None: ...

class CachedHistory(_message.Message):
    __slots__ = ("eventCount",)
    EVENTCOUNT_FIELD_NUMBER: _ClassVar[int]
    eventCount: int
    def __init__(self, eventCount: _Optional[int] = ...) -> None: ...

class WorkflowRequest(_message.Message):
    __slots__ = ("instanceId", "executionId", "pastEvents", "newEvents", "requiresHistoryStreaming", "router", "propagatedHistory", "cachedHistory")
    INSTANCEID_FIELD_NUMBER: _ClassVar[int]
    EXECUTIONID_FIELD_NUMBER: _ClassVar[int]
    PASTEVENTS_FIELD_NUMBER: _ClassVar[int]
    NEWEVENTS_FIELD_NUMBER: _ClassVar[int]
    REQUIRESHISTORYSTREAMING_FIELD_NUMBER: _ClassVar[int]
    ROUTER_FIELD_NUMBER: _ClassVar[int]
    PROPAGATEDHISTORY_FIELD_NUMBER: _ClassVar[int]
    CACHEDHISTORY_FIELD_NUMBER: _ClassVar[int]
    instanceId: str
    executionId: _wrappers_pb2.StringValue
    pastEvents: _containers.RepeatedCompositeFieldContainer[HistoryEvent]
    newEvents: _containers.RepeatedCompositeFieldContainer[HistoryEvent]
    requiresHistoryStreaming: bool
    router: TaskRouter
    propagatedHistory: PropagatedHistory
    cachedHistory: CachedHistory
    def __init__(self, instanceId: _Optional[str] = ..., executionId: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ..., pastEvents: _Optional[_Iterable[_Union[HistoryEvent, _Mapping]]] = ..., newEvents: _Optional[_Iterable[_Union[HistoryEvent, _Mapping]]] = ..., requiresHistoryStreaming: _Optional[bool] = ..., router: _Optional[_Union[TaskRouter, _Mapping]] = ..., propagatedHistory: _Optional[_Union[PropagatedHistory, _Mapping]] = ..., cachedHistory: _Optional[_Union[CachedHistory, _Mapping]] = ...) -> None: ...

class WorkflowResponse(_message.Message):
    __slots__ = ("instanceId", "actions", "customStatus", "completionToken", "numEventsProcessed", "version")
    INSTANCEID_FIELD_NUMBER: _ClassVar[int]
    ACTIONS_FIELD_NUMBER: _ClassVar[int]
    CUSTOMSTATUS_FIELD_NUMBER: _ClassVar[int]
    COMPLETIONTOKEN_FIELD_NUMBER: _ClassVar[int]
    NUMEVENTSPROCESSED_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    instanceId: str
    actions: _containers.RepeatedCompositeFieldContainer[WorkflowAction]
    customStatus: _wrappers_pb2.StringValue
    completionToken: str
    numEventsProcessed: _wrappers_pb2.Int32Value
    version: WorkflowVersion
    def __init__(self, instanceId: _Optional[str] = ..., actions: _Optional[_Iterable[_Union[WorkflowAction, _Mapping]]] = ..., customStatus: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ..., completionToken: _Optional[str] = ..., numEventsProcessed: _Optional[_Union[_wrappers_pb2.Int32Value, _Mapping]] = ..., version: _Optional[_Union[WorkflowVersion, _Mapping]] = ...) -> None: ...

class ActivityRequest(_message.Message):
    __slots__ = ("name", "version", "input", "workflowInstance", "taskId", "parentTraceContext", "taskExecutionId", "propagatedHistory")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    WORKFLOWINSTANCE_FIELD_NUMBER: _ClassVar[int]
    TASKID_FIELD_NUMBER: _ClassVar[int]
    PARENTTRACECONTEXT_FIELD_NUMBER: _ClassVar[int]
    TASKEXECUTIONID_FIELD_NUMBER: _ClassVar[int]
    PROPAGATEDHISTORY_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: _wrappers_pb2.StringValue
    input: _wrappers_pb2.StringValue
    workflowInstance: WorkflowInstance
    taskId: int
    parentTraceContext: TraceContext
    taskExecutionId: str
    propagatedHistory: PropagatedHistory
    def __init__(self, name: _Optional[str] = ..., version: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ..., input: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ..., workflowInstance: _Optional[_Union[WorkflowInstance, _Mapping]] = ..., taskId: _Optional[int] = ..., parentTraceContext: _Optional[_Union[TraceContext, _Mapping]] = ..., taskExecutionId: _Optional[str] = ..., propagatedHistory: _Optional[_Union[PropagatedHistory, _Mapping]] = ...) -> None: ...

class ActivityResponse(_message.Message):
    __slots__ = ("instanceId", "taskId", "result", "failureDetails", "completionToken")
    INSTANCEID_FIELD_NUMBER: _ClassVar[int]
    TASKID_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    FAILUREDETAILS_FIELD_NUMBER: _ClassVar[int]
    COMPLETIONTOKEN_FIELD_NUMBER: _ClassVar[int]
    instanceId: str
    taskId: int
    result: _wrappers_pb2.StringValue
    failureDetails: TaskFailureDetails
    completionToken: str
    def __init__(self, instanceId: _Optional[str] = ..., taskId: _Optional[int] = ..., result: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ..., failureDetails: _Optional[_Union[TaskFailureDetails, _Mapping]] = ..., completionToken: _Optional[str] = ...) -> None: ...

class CompleteTaskResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CreateInstanceRequest(_message.Message):
    __slots__ = ("instanceId", "name", "version", "input", "scheduledStartTimestamp", "executionId", "tags", "parentTraceContext", "enforceUniqueInstanceId", "router")
    class TagsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    INSTANCEID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    SCHEDULEDSTARTTIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    EXECUTIONID_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    PARENTTRACECONTEXT_FIELD_NUMBER: _ClassVar[int]
    ENFORCEUNIQUEINSTANCEID_FIELD_NUMBER: _ClassVar[int]
    ROUTER_FIELD_NUMBER: _ClassVar[int]
    instanceId: str
    name: str
    version: _wrappers_pb2.StringValue
    input: _wrappers_pb2.StringValue
    scheduledStartTimestamp: _timestamp_pb2.Timestamp
    executionId: _wrappers_pb2.StringValue
    tags: _containers.ScalarMap[str, str]
    parentTraceContext: TraceContext
    enforceUniqueInstanceId: bool
    router: TaskRouter
    def __init__(self, instanceId: _Optional[str] = ..., name: _Optional[str] = ..., version: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ..., input: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ..., scheduledStartTimestamp: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., executionId: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ..., tags: _Optional[_Mapping[str, str]] = ..., parentTraceContext: _Optional[_Union[TraceContext, _Mapping]] = ..., enforceUniqueInstanceId: _Optional[bool] = ..., router: _Optional[_Union[TaskRouter, _Mapping]] = ...) -> None: ...

class CreateInstanceResponse(_message.Message):
    __slots__ = ("instanceId",)
    INSTANCEID_FIELD_NUMBER: _ClassVar[int]
    instanceId: str
    def __init__(self, instanceId: _Optional[str] = ...) -> None: ...

class GetInstanceRequest(_message.Message):
    __slots__ = ("instanceId", "getInputsAndOutputs", "router")
    INSTANCEID_FIELD_NUMBER: _ClassVar[int]
    GETINPUTSANDOUTPUTS_FIELD_NUMBER: _ClassVar[int]
    ROUTER_FIELD_NUMBER: _ClassVar[int]
    instanceId: str
    getInputsAndOutputs: bool
    router: TaskRouter
    def __init__(self, instanceId: _Optional[str] = ..., getInputsAndOutputs: _Optional[bool] = ..., router: _Optional[_Union[TaskRouter, _Mapping]] = ...) -> None: ...

class GetInstanceResponse(_message.Message):
    __slots__ = ("exists", "workflowState")
    EXISTS_FIELD_NUMBER: _ClassVar[int]
    WORKFLOWSTATE_FIELD_NUMBER: _ClassVar[int]
    exists: bool
    workflowState: WorkflowState
    def __init__(self, exists: _Optional[bool] = ..., workflowState: _Optional[_Union[WorkflowState, _Mapping]] = ...) -> None: ...

class RaiseEventRequest(_message.Message):
    __slots__ = ("instanceId", "name", "input", "router")
    INSTANCEID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    ROUTER_FIELD_NUMBER: _ClassVar[int]
    instanceId: str
    name: str
    input: _wrappers_pb2.StringValue
    router: TaskRouter
    def __init__(self, instanceId: _Optional[str] = ..., name: _Optional[str] = ..., input: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ..., router: _Optional[_Union[TaskRouter, _Mapping]] = ...) -> None: ...

class RaiseEventResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class TerminateRequest(_message.Message):
    __slots__ = ("instanceId", "output", "recursive", "router")
    INSTANCEID_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    RECURSIVE_FIELD_NUMBER: _ClassVar[int]
    ROUTER_FIELD_NUMBER: _ClassVar[int]
    instanceId: str
    output: _wrappers_pb2.StringValue
    recursive: bool
    router: TaskRouter
    def __init__(self, instanceId: _Optional[str] = ..., output: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ..., recursive: _Optional[bool] = ..., router: _Optional[_Union[TaskRouter, _Mapping]] = ...) -> None: ...

class TerminateResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SuspendRequest(_message.Message):
    __slots__ = ("instanceId", "reason", "router")
    INSTANCEID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    ROUTER_FIELD_NUMBER: _ClassVar[int]
    instanceId: str
    reason: _wrappers_pb2.StringValue
    router: TaskRouter
    def __init__(self, instanceId: _Optional[str] = ..., reason: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ..., router: _Optional[_Union[TaskRouter, _Mapping]] = ...) -> None: ...

class SuspendResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ResumeRequest(_message.Message):
    __slots__ = ("instanceId", "reason", "router")
    INSTANCEID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    ROUTER_FIELD_NUMBER: _ClassVar[int]
    instanceId: str
    reason: _wrappers_pb2.StringValue
    router: TaskRouter
    def __init__(self, instanceId: _Optional[str] = ..., reason: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ..., router: _Optional[_Union[TaskRouter, _Mapping]] = ...) -> None: ...

class ResumeResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PurgeInstanceFilter(_message.Message):
    __slots__ = ("createdTimeFrom", "createdTimeTo", "runtimeStatus")
    CREATEDTIMEFROM_FIELD_NUMBER: _ClassVar[int]
    CREATEDTIMETO_FIELD_NUMBER: _ClassVar[int]
    RUNTIMESTATUS_FIELD_NUMBER: _ClassVar[int]
    createdTimeFrom: _timestamp_pb2.Timestamp
    createdTimeTo: _timestamp_pb2.Timestamp
    runtimeStatus: _containers.RepeatedScalarFieldContainer[OrchestrationStatus]
    def __init__(self, createdTimeFrom: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., createdTimeTo: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., runtimeStatus: _Optional[_Iterable[_Union[OrchestrationStatus, str]]] = ...) -> None: ...

class PurgeInstancesRequest(_message.Message):
    __slots__ = ("instanceId", "purgeInstanceFilter", "recursive", "force", "router")
    INSTANCEID_FIELD_NUMBER: _ClassVar[int]
    PURGEINSTANCEFILTER_FIELD_NUMBER: _ClassVar[int]
    RECURSIVE_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    ROUTER_FIELD_NUMBER: _ClassVar[int]
    instanceId: str
    purgeInstanceFilter: PurgeInstanceFilter
    recursive: bool
    force: bool
    router: TaskRouter
    def __init__(self, instanceId: _Optional[str] = ..., purgeInstanceFilter: _Optional[_Union[PurgeInstanceFilter, _Mapping]] = ..., recursive: _Optional[bool] = ..., force: _Optional[bool] = ..., router: _Optional[_Union[TaskRouter, _Mapping]] = ...) -> None: ...

class PurgeInstancesResponse(_message.Message):
    __slots__ = ("deletedInstanceCount", "isComplete")
    DELETEDINSTANCECOUNT_FIELD_NUMBER: _ClassVar[int]
    ISCOMPLETE_FIELD_NUMBER: _ClassVar[int]
    deletedInstanceCount: int
    isComplete: _wrappers_pb2.BoolValue
    def __init__(self, deletedInstanceCount: _Optional[int] = ..., isComplete: _Optional[_Union[_wrappers_pb2.BoolValue, _Mapping]] = ...) -> None: ...

class RerunWorkflowFromEventRequest(_message.Message):
    __slots__ = ("sourceInstanceID", "eventID", "newInstanceID", "input", "overwriteInput", "newChildWorkflowInstanceID", "router")
    SOURCEINSTANCEID_FIELD_NUMBER: _ClassVar[int]
    EVENTID_FIELD_NUMBER: _ClassVar[int]
    NEWINSTANCEID_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    OVERWRITEINPUT_FIELD_NUMBER: _ClassVar[int]
    NEWCHILDWORKFLOWINSTANCEID_FIELD_NUMBER: _ClassVar[int]
    ROUTER_FIELD_NUMBER: _ClassVar[int]
    sourceInstanceID: str
    eventID: int
    newInstanceID: str
    input: _wrappers_pb2.StringValue
    overwriteInput: bool
    newChildWorkflowInstanceID: str
    router: TaskRouter
    def __init__(self, sourceInstanceID: _Optional[str] = ..., eventID: _Optional[int] = ..., newInstanceID: _Optional[str] = ..., input: _Optional[_Union[_wrappers_pb2.StringValue, _Mapping]] = ..., overwriteInput: _Optional[bool] = ..., newChildWorkflowInstanceID: _Optional[str] = ..., router: _Optional[_Union[TaskRouter, _Mapping]] = ...) -> None: ...

class RerunWorkflowFromEventResponse(_message.Message):
    __slots__ = ("newInstanceID",)
    NEWINSTANCEID_FIELD_NUMBER: _ClassVar[int]
    newInstanceID: str
    def __init__(self, newInstanceID: _Optional[str] = ...) -> None: ...

class ListInstanceIDsRequest(_message.Message):
    __slots__ = ("continuationToken", "pageSize")
    CONTINUATIONTOKEN_FIELD_NUMBER: _ClassVar[int]
    PAGESIZE_FIELD_NUMBER: _ClassVar[int]
    continuationToken: str
    pageSize: int
    def __init__(self, continuationToken: _Optional[str] = ..., pageSize: _Optional[int] = ...) -> None: ...

class ListInstanceIDsResponse(_message.Message):
    __slots__ = ("instanceIds", "continuationToken")
    INSTANCEIDS_FIELD_NUMBER: _ClassVar[int]
    CONTINUATIONTOKEN_FIELD_NUMBER: _ClassVar[int]
    instanceIds: _containers.RepeatedScalarFieldContainer[str]
    continuationToken: str
    def __init__(self, instanceIds: _Optional[_Iterable[str]] = ..., continuationToken: _Optional[str] = ...) -> None: ...

class GetInstanceHistoryRequest(_message.Message):
    __slots__ = ("instanceId",)
    INSTANCEID_FIELD_NUMBER: _ClassVar[int]
    instanceId: str
    def __init__(self, instanceId: _Optional[str] = ...) -> None: ...

class GetInstanceHistoryResponse(_message.Message):
    __slots__ = ("events",)
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[HistoryEvent]
    def __init__(self, events: _Optional[_Iterable[_Union[HistoryEvent, _Mapping]]] = ...) -> None: ...
