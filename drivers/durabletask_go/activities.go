package main

// The built-in activities echo, fail, sleep and record, exactly as fake_worker/activities.py
// (docs/programs.md "Built-in activities"): attempts are counted per logical call, keyed by
// (instance id, task execution id) or (instance id, "task-<task id>") without an execution id;
// `record` appends one json.dumps line per execution to $CONFORMANCE_LEDGER.
//
// durabletask-go's task.ActivityContext has no instance id (only GetTaskID and
// GetTaskExecutionID), but the ledger and the attempt key need it. The ActivityRequest the SDK
// receives carries it (workflowInstance.instanceId), so a gRPC stream interceptor on the
// connection given to client.NewTaskHubGrpcClient notes it per task when the work item arrives,
// before the SDK dispatches the activity. It only reads messages; nothing the SDK sends changes.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/dapr/durabletask-go/api/protos"
	"github.com/dapr/durabletask-go/task"
)

var builtinActivities = []string{"echo", "fail", "sleep", "record"}

// Activity failures. durabletask-go reports an activity error's errorType as its Go type
// (fmt.Sprintf("%T", err)), so these show as "main.ActivityFailure" and "main.LedgerMissing".
type ActivityFailure struct{ Message string }

func (e ActivityFailure) Error() string { return e.Message }

type LedgerMissing struct{ Message string }

func (e LedgerMissing) Error() string { return e.Message }

// InputError: an input the activity cannot use (Python raises TypeError/ValueError there).
type InputError struct{ Message string }

func (e InputError) Error() string { return e.Message }

// ------------------------------------------------------------------ instance ids of activity requests

type activityKey struct {
	execID string
	taskID int32
}

type instanceTracker struct {
	mu     sync.Mutex
	byExec map[string]string // task execution id -> instance id
	byTask map[int32]string  // task id -> instance id (requests without an execution id; last wins)
}

func newInstanceTracker() *instanceTracker {
	return &instanceTracker{byExec: map[string]string{}, byTask: map[int32]string{}}
}

func (t *instanceTracker) note(req *protos.ActivityRequest) {
	iid := req.GetWorkflowInstance().GetInstanceId()
	t.mu.Lock()
	defer t.mu.Unlock()
	if req.GetTaskExecutionId() != "" {
		t.byExec[req.GetTaskExecutionId()] = iid
	} else {
		t.byTask[req.GetTaskId()] = iid
	}
}

func (t *instanceTracker) instanceOf(k activityKey) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if k.execID != "" {
		return t.byExec[k.execID]
	}
	return t.byTask[k.taskID]
}

// streamInterceptor watches the GetWorkItems stream for activity requests.
func (t *instanceTracker) streamInterceptor(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn,
	method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil || !strings.HasSuffix(method, "/GetWorkItems") {
		return s, err
	}
	return &watchedStream{ClientStream: s, tracker: t}, nil
}

type watchedStream struct {
	grpc.ClientStream
	tracker *instanceTracker
}

func (w *watchedStream) RecvMsg(m any) error {
	err := w.ClientStream.RecvMsg(m)
	if err == nil {
		if item, ok := m.(*protos.WorkItem); ok {
			if req := item.GetActivityRequest(); req != nil {
				w.tracker.note(req)
			}
		}
	}
	return err
}

// ------------------------------------------------------------------ the activities

type activityRunner struct {
	ledger   string // --ledger, else $CONFORMANCE_LEDGER
	tracker  *instanceTracker
	mu       sync.Mutex
	attempts map[[2]string]int
	fileMu   sync.Mutex
}

func newActivityRunner(ledger string, tracker *instanceTracker) *activityRunner {
	return &activityRunner{ledger: ledger, tracker: tracker, attempts: map[[2]string]int{}}
}

func (r *activityRunner) register(reg *task.TaskRegistry) error {
	for _, name := range builtinActivities {
		name := name
		if err := reg.AddActivityN(name, func(ctx task.ActivityContext) (any, error) {
			return r.run(ctx, name)
		}); err != nil {
			return err
		}
	}
	return nil
}

func (r *activityRunner) run(ctx task.ActivityContext, name string) (any, error) {
	var raw json.RawMessage
	if err := ctx.GetInput(&raw); err != nil {
		return nil, err
	}
	input, err := pyLoads(raw)
	if err != nil {
		return nil, InputError{fmt.Sprintf("activity input is not JSON: %v", err)}
	}
	taskID, execID := ctx.GetTaskID(), ctx.GetTaskExecutionID()
	iid := r.tracker.instanceOf(activityKey{execID: execID, taskID: taskID})
	callKey := execID
	if callKey == "" {
		callKey = fmt.Sprintf("task-%d", taskID)
	}
	r.mu.Lock()
	r.attempts[[2]string{iid, callKey}]++
	attempt := r.attempts[[2]string{iid, callKey}]
	r.mu.Unlock()

	result := func(v any) (any, error) {
		if v == nil {
			return nil, nil
		}
		return pyJSON{v}, nil
	}
	switch name {
	case "echo":
		return result(input)
	case "sleep":
		s, err := pyFloat(orZero(input))
		if err != nil {
			return nil, err
		}
		if s > 0 {
			select {
			case <-time.After(seconds(s)):
			case <-ctx.Context().Done():
				return nil, ctx.Context().Err()
			}
		}
		return result(input)
	case "fail":
		spec, ok := input.(*OMap)
		if !ok {
			n, err := pyInt(orZero(input))
			if err != nil {
				return nil, err
			}
			spec = NewOMap()
			spec.Set("times", n)
		}
		timesVal, hasTimes := spec.Get("times")
		times := int64(0)
		if hasTimes {
			n, err := pyInt(timesVal)
			if err != nil {
				return nil, err
			}
			times = n
		}
		if int64(attempt) <= times {
			msg, ok := spec.Get("message")
			if !ok {
				msg = fmt.Sprintf("planned failure %d of %s", attempt, pyStr(timesVal))
			}
			return nil, ActivityFailure{pyStr(msg)}
		}
		return result(input)
	case "record":
		path := r.ledger
		if path == "" {
			path = os.Getenv("CONFORMANCE_LEDGER")
		}
		if path == "" {
			return nil, LedgerMissing{"the record activity needs env CONFORMANCE_LEDGER to name a file"}
		}
		line := NewOMap()
		line.Set("instance_id", iid)
		line.Set("task_id", int64(taskID))
		line.Set("task_execution_id", execID)
		line.Set("attempt", int64(attempt))
		line.Set("worker_pid", int64(os.Getpid()))
		line.Set("time", float64(time.Now().UnixNano())/1e9)
		line.Set("input", input)
		r.fileMu.Lock()
		defer r.fileMu.Unlock()
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return nil, err
		}
		if _, err := f.WriteString(pyDumps(line) + "\n"); err != nil {
			f.Close()
			return nil, err
		}
		if err := f.Close(); err != nil {
			return nil, err
		}
		return result(input)
	}
	return nil, fmt.Errorf("no built-in activity %q", name)
}

// orZero is Python's `x or 0`.
func orZero(v any) any {
	if !pyTruthy(v) {
		return int64(0)
	}
	return v
}

// pyInt is Python's int(v) for the values the fail activity accepts.
func pyInt(v any) (int64, error) {
	switch x := v.(type) {
	case bool:
		if x {
			return 1, nil
		}
		return 0, nil
	case int64:
		return x, nil
	case float64:
		return int64(x), nil
	case string:
		if n, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64); err == nil {
			return n, nil
		}
		return 0, InputError{fmt.Sprintf("invalid literal for int() with base 10: %s", pyStrRepr(x))}
	}
	return 0, InputError{fmt.Sprintf("int() argument must be a string, a bytes-like object or a real number, not '%s'",
		pyTypeName(v))}
}

// pyFloat is Python's float(v) for the values the sleep activity accepts.
func pyFloat(v any) (float64, error) {
	if _, isStr := v.(string); !isStr {
		if n, ok := asNumber(v); ok {
			return n.float(), nil
		}
		return 0, InputError{fmt.Sprintf("float() argument must be a string or a real number, not '%s'", pyTypeName(v))}
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(v.(string)), 64)
	if err != nil {
		return 0, InputError{fmt.Sprintf("could not convert string to float: %s", pyStrRepr(v.(string)))}
	}
	return f, nil
}
