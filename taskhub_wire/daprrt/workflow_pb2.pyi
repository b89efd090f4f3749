import datetime

from google.protobuf import empty_pb2 as _empty_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GetWorkflowRequest(_message.Message):
    __slots__ = ("instance_id", "workflow_component")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_COMPONENT_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    workflow_component: str
    def __init__(self, instance_id: _Optional[str] = ..., workflow_component: _Optional[str] = ...) -> None: ...

class GetWorkflowResponse(_message.Message):
    __slots__ = ("instance_id", "workflow_name", "created_at", "last_updated_at", "runtime_status", "properties")
    class PropertiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_NAME_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_STATUS_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    workflow_name: str
    created_at: _timestamp_pb2.Timestamp
    last_updated_at: _timestamp_pb2.Timestamp
    runtime_status: str
    properties: _containers.ScalarMap[str, str]
    def __init__(self, instance_id: _Optional[str] = ..., workflow_name: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., runtime_status: _Optional[str] = ..., properties: _Optional[_Mapping[str, str]] = ...) -> None: ...

class StartWorkflowRequest(_message.Message):
    __slots__ = ("instance_id", "workflow_component", "workflow_name", "options", "input")
    class OptionsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_COMPONENT_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_NAME_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    workflow_component: str
    workflow_name: str
    options: _containers.ScalarMap[str, str]
    input: bytes
    def __init__(self, instance_id: _Optional[str] = ..., workflow_component: _Optional[str] = ..., workflow_name: _Optional[str] = ..., options: _Optional[_Mapping[str, str]] = ..., input: _Optional[bytes] = ...) -> None: ...

class StartWorkflowResponse(_message.Message):
    __slots__ = ("instance_id",)
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    def __init__(self, instance_id: _Optional[str] = ...) -> None: ...

class TerminateWorkflowRequest(_message.Message):
    __slots__ = ("instance_id", "workflow_component")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_COMPONENT_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    workflow_component: str
    def __init__(self, instance_id: _Optional[str] = ..., workflow_component: _Optional[str] = ...) -> None: ...

class PauseWorkflowRequest(_message.Message):
    __slots__ = ("instance_id", "workflow_component")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_COMPONENT_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    workflow_component: str
    def __init__(self, instance_id: _Optional[str] = ..., workflow_component: _Optional[str] = ...) -> None: ...

class ResumeWorkflowRequest(_message.Message):
    __slots__ = ("instance_id", "workflow_component")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_COMPONENT_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    workflow_component: str
    def __init__(self, instance_id: _Optional[str] = ..., workflow_component: _Optional[str] = ...) -> None: ...

class RaiseEventWorkflowRequest(_message.Message):
    __slots__ = ("instance_id", "workflow_component", "event_name", "event_data")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_COMPONENT_FIELD_NUMBER: _ClassVar[int]
    EVENT_NAME_FIELD_NUMBER: _ClassVar[int]
    EVENT_DATA_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    workflow_component: str
    event_name: str
    event_data: bytes
    def __init__(self, instance_id: _Optional[str] = ..., workflow_component: _Optional[str] = ..., event_name: _Optional[str] = ..., event_data: _Optional[bytes] = ...) -> None: ...

class PurgeWorkflowRequest(_message.Message):
    __slots__ = ("instance_id", "workflow_component")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_COMPONENT_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    workflow_component: str
    def __init__(self, instance_id: _Optional[str] = ..., workflow_component: _Optional[str] = ...) -> None: ...
