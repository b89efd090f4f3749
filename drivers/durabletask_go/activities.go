package main

// The built-in activities echo, fail, sleep, record and propagated (docs/programs.md "Built-in activities",
// checked against the golden file's `activities`): attempts are counted per logical call, keyed by
// (instance id, task execution id) or (instance id, "task-<task id>") without an execution id;
// `record` appends one JSON line per execution to $CONFORMANCE_LEDGER.
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
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/dapr/durabletask-go/api"
	"github.com/dapr/durabletask-go/api/protos"
	"github.com/dapr/durabletask-go/task"
)

var builtinActivities = []string{"echo", "fail", "sleep", "record", "propagated"}

// Activity failures. durabletask-go reports an activity error's errorType as its Go type
// (fmt.Sprintf("%T", err)), so these show as "main.ActivityFailure" and "main.LedgerMissing".
type ActivityFailure struct{ Message string }

func (e ActivityFailure) Error() string { return e.Message }

type LedgerMissing struct{ Message string }

func (e LedgerMissing) Error() string { return e.Message }

// ActivityInputError: an input the activity does not take.
type ActivityInputError struct{ Message string }

func (e ActivityInputError) Error() string { return e.Message }

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
	input, err := decodeValue(raw)
	if err != nil {
		return nil, ActivityInputError{fmt.Sprintf("activity input is not JSON: %v", err)}
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

	result, sleep, err := builtin(name, input, attempt)
	if name == "propagated" {
		result = propagatedSummary(ctx.GetPropagatedHistory())
	}
	if err != nil {
		return nil, err
	}
	if sleep > 0 {
		select {
		case <-time.After(seconds(sleep)):
		case <-ctx.Context().Done():
			return nil, ctx.Context().Err()
		}
	}
	if name == "record" {
		path := r.ledger
		if path == "" {
			path = os.Getenv("CONFORMANCE_LEDGER")
		}
		if path == "" {
			return nil, LedgerMissing{"the record activity needs env CONFORMANCE_LEDGER to name a file"}
		}
		line := map[string]any{"instance_id": iid, "task_id": taskID, "task_execution_id": execID, "attempt": attempt,
			"worker_pid": os.Getpid(), "time": float64(time.Now().UnixNano()) / 1e9, "input": input}
		r.fileMu.Lock()
		defer r.fileMu.Unlock()
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return nil, err
		}
		if _, err := f.WriteString(jsonText(line) + "\n"); err != nil {
			f.Close()
			return nil, err
		}
		if err := f.Close(); err != nil {
			return nil, err
		}
	}
	return result, nil
}

// propagatedSummary is the `propagated` activity's value: null without a received history, else its
// scope and one {app, instance, workflow} per chunk in the order received (api/propagation.go
// GetWorkflows: one WorkflowResult per chunk, ancestor first). The chunks' events are not listed:
// the `{"events": true}` form needs propagated_events, which this driver does not declare.
func propagatedSummary(ph *api.PropagatedHistory) any {
	if ph == nil {
		return nil
	}
	chunks := []any{}
	for _, w := range ph.GetWorkflows() {
		chunks = append(chunks, map[string]any{"app": w.AppID, "instance": w.InstanceID, "workflow": w.Name})
	}
	return map[string]any{"scope": scopeName(ph.Scope()), "chunks": chunks}
}

// scopeName: OWN_HISTORY -> "own", LINEAGE -> "lineage", any other scope its enum name in lower case
// (as the Python driver names it).
func scopeName(scope protos.HistoryPropagationScope) string {
	switch scope {
	case protos.HistoryPropagationScope_HISTORY_PROPAGATION_SCOPE_OWN_HISTORY:
		return "own"
	case protos.HistoryPropagationScope_HISTORY_PROPAGATION_SCOPE_LINEAGE:
		return "lineage"
	}
	return strings.ToLower(strings.TrimPrefix(scope.String(), "HISTORY_PROPAGATION_SCOPE_"))
}

// builtin is what a built-in activity does on its attempt-th execution of a call (docs/programs.md
// "Built-in activities", the golden file's `activities`): its result, or seconds to sleep first.
func builtin(name string, input any, attempt int) (any, float64, error) {
	switch name {
	case "echo", "record":
		return input, 0, nil
	case "propagated": // its value is the call's received history (propagatedSummary), null without one
		return nil, 0, nil
	case "sleep":
		if input == nil {
			return input, 0, nil
		}
		if s, ok := input.(float64); ok {
			return input, max(s, 0), nil
		}
		return nil, 0, ActivityInputError{"sleep takes a number of seconds or null, got " + text(input)}
	case "fail":
		spec, isMap := input.(map[string]any)
		times, ok := input, true
		if isMap {
			times = spec["times"]
		}
		if times == nil {
			times = 0.0
		}
		n, ok := times.(float64)
		if !ok {
			return nil, 0, ActivityInputError{"fail takes a number or {times, message}, got " + text(input)}
		}
		if float64(attempt) <= n {
			if message, has := spec["message"]; has {
				return nil, 0, ActivityFailure{text(message)}
			}
			return nil, 0, ActivityFailure{fmt.Sprintf("planned failure %d of %s", attempt, text(n))}
		}
		return input, 0, nil
	}
	return nil, 0, fmt.Errorf("no built-in activity %q", name)
}
