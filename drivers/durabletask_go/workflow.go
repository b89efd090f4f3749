package main

// The interpreter: every program (canonical.go) becomes a durabletask-go workflow function that walks
// its steps with the SDK's own API (task.WorkflowContext: CallActivity, CallChildWorkflow,
// ScheduleNewWorkflow, CreateTimer, WaitForSingleEvent, IsPatched, SetCustomStatus, ContinueAsNew;
// Task.Await).
// Like any durabletask-go workflow, the function is re-run from the start on every turn and blocks
// by Await panicking with task.ErrTaskBlocked, which the SDK recovers.

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/dapr/durabletask-go/api"
	"github.com/dapr/durabletask-go/task"
)

// ProgramFailure is the error of a `fail` step. durabletask-go reports a workflow failure's
// errorType as the Go type of the returned error (reflect.TypeOf(err).String()), so it shows as
// "main.ProgramFailure" whatever the step's `type` says: user code cannot choose it.
type ProgramFailure struct {
	Type    string
	Message string
}

func (e ProgramFailure) Error() string { return e.Message }

// capabilityGaps lists the steps durabletask-go cannot express, by path (the driver refuses to start).
func capabilityGaps(programs Programs) []string {
	var gaps []string
	// checkCall: what a call_activity / call_child asks that the driver cannot send (a scope it does not
	// know, retry delays the SDK cannot express).
	checkCall := func(s *Step, path string) {
		if p := s.Propagation; p != nil && *p != "own" && *p != "lineage" && *p != "none" {
			gaps = append(gaps, fmt.Sprintf("%s.propagation: scope %q is unknown to this driver (own, lineage "+
				"or none)", path, *p))
		}
		if s.Retry == nil {
			return
		}
		// task.RetryPolicy works in whole milliseconds (computeNextDelay uses Duration.Milliseconds()
		// and treats a delay of 0 as "do not retry"), Validate() rejects InitialRetryInterval <= 0 and
		// a MaxRetryInterval <= 0 means "no limit".
		if s.Retry.FirstDelay < 0.001 {
			gaps = append(gaps, fmt.Sprintf("%s.retry.first_delay: %gs is below 1ms; durabletask-go's RetryPolicy "+
				"needs InitialRetryInterval >= 1ms (it computes delays in whole milliseconds and does not retry "+
				"after a 0ms delay)", path, s.Retry.FirstDelay))
		}
		if s.Retry.MaxDelay != nil && *s.Retry.MaxDelay < 0.001 {
			gaps = append(gaps, fmt.Sprintf("%s.retry.max_delay: %gs is below 1ms; durabletask-go's RetryPolicy "+
				"treats MaxRetryInterval <= 0 as no limit", path, *s.Retry.MaxDelay))
		}
		// RetryTimeout <= 0 means "no limit" (task/activity.go Validate), so a zero timeout, which allows
		// no retry in the program language, cannot be sent. A positive one can: every release the
		// version matrix builds (v0.11.0 to v0.14.0) has the field.
		if s.Retry.Timeout != nil && seconds(*s.Retry.Timeout) <= 0 {
			gaps = append(gaps, fmt.Sprintf("%s.retry.timeout: %gs cannot be expressed; durabletask-go's RetryPolicy "+
				"treats RetryTimeout <= 0 as no limit (it would retry)", path, *s.Retry.Timeout))
		}
	}
	var walk func(steps []*Step, where string)
	walk = func(steps []*Step, where string) {
		for i, s := range steps {
			path := fmt.Sprintf("%s[%d].%s", where, i, s.Step)
			switch s.Step {
			case "any":
				gaps = append(gaps, path+": 'any' (the first of several tasks to finish) has no equivalent in "+
					"durabletask-go: task.Task has only Await and TaskExecutionId, and the SDK has no WhenAny "+
					"or completion check")
			case "all":
				for j, t := range s.Tasks {
					checkCall(t, fmt.Sprintf("%s[%d].%s", path, j, t.Step))
				}
			case "call_activity", "call_child":
				checkCall(s, path)
			case "if_patched", "if":
				walk(s.Then, path+".then")
				walk(s.Else, path+".else")
			case "spawn":
				if !detachedWorkflows {
					gaps = append(gaps, fmt.Sprintf("%s: this durabletask-go release has no detached workflows "+
						"(WorkflowContext.ScheduleNewWorkflow, task/detached.go, came after it)", path))
				}
			case "timer", "wait_event", "set", "set_status", "continue_as_new", "return", "fail":
			default:
				gaps = append(gaps, fmt.Sprintf("%s: step kind %q is unknown to this driver (a language extension "+
					"it predates)", path, s.Step))
			}
		}
	}
	names := make([]string, 0, len(programs))
	for name := range programs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		for _, v := range programs[name].Versions {
			where := "$.programs." + name + ".steps"
			if v.Name != nil {
				where = "$.programs." + name + ".versions." + *v.Name + ".steps"
			}
			walk(v.Steps, where)
		}
	}
	return gaps
}

type returned struct {
	done  bool // a return / continue_as_new step ran
	value any
}

func makeWorkflow(steps []*Step) task.Workflow {
	return func(ctx *task.WorkflowContext) (result any, err error) {
		defer func() {
			// A bug of ours must fail the workflow, not crash the worker: the SDK re-panics anything
			// but its own ErrTaskBlocked, which must pass through untouched.
			if r := recover(); r != nil {
				if r == task.ErrTaskBlocked {
					panic(r)
				}
				result, err = nil, fmt.Errorf("durabletask-go driver: internal error: %v", r)
			}
		}()
		var raw json.RawMessage
		if err := ctx.GetInput(&raw); err != nil {
			return nil, err
		}
		input, err := decodeValue(raw)
		if err != nil {
			return nil, fmt.Errorf("workflow input is not JSON: %w", err)
		}
		env := map[string]any{"input": input, "instance_id": string(ctx.ID)}
		out, err := runSteps(ctx, steps, env)
		if err != nil {
			return nil, err
		}
		if out.done && out.value != nil {
			return out.value, nil
		}
		return nil, nil
	}
}

func seconds(s float64) time.Duration {
	// Python's timedelta(seconds=s) keeps microseconds, rounding half to even.
	return time.Duration(math.RoundToEven(s*1e6)) * time.Microsecond
}

func retryPolicy(r *Retry) *task.RetryPolicy {
	if r == nil {
		return nil
	}
	p := &task.RetryPolicy{
		MaxAttempts:          r.MaxAttempts,
		InitialRetryInterval: seconds(r.FirstDelay),
		BackoffCoefficient:   r.Backoff,
	}
	if r.MaxDelay != nil {
		p.MaxRetryInterval = seconds(*r.MaxDelay)
	}
	if r.Timeout != nil {
		// The SDK's rule, not the program language's sum of delays: no retry once the workflow's clock
		// at a failure is after the first attempt's turn time plus RetryTimeout (task/orchestrator.go
		// computeNextDelay).
		p.RetryTimeout = seconds(*r.Timeout)
	}
	return p
}

// propagation: the step's `propagation` as the SDK's scope option (task/propagation.go
// WithHistoryPropagation sets the action's historyPropagationScope); nil sends no scope.
func propagation(scope *string) api.PropagationOption {
	if scope == nil {
		return nil
	}
	switch *scope {
	case "own":
		return api.PropagateOwnHistory()
	case "lineage":
		return api.PropagateLineage()
	}
	return nil // "none": no scope, as without the key
}

// rawPayload: a value as JSON text for the SDK's WithRaw*Input options. nil: no payload at all.
func rawPayload(v any) *wrapperspb.StringValue {
	if v == nil {
		return nil
	}
	return wrapperspb.String(jsonText(v))
}

// makeTask schedules a task step (call_activity, call_child, timer, wait_event) without awaiting it.
func makeTask(ctx *task.WorkflowContext, s *Step, env map[string]any) (task.Task, error) {
	switch s.Step {
	case "call_activity":
		input, err := evaluate(s.Input, env)
		if err != nil {
			return nil, err
		}
		var opts []task.CallActivityOption
		if input != nil {
			opts = append(opts, task.WithRawActivityInput(rawPayload(input)))
		}
		if p := retryPolicy(s.Retry); p != nil {
			opts = append(opts, task.WithActivityRetryPolicy(p))
		}
		if s.App != nil {
			opts = append(opts, task.WithActivityAppID(*s.App))
		}
		if p := propagation(s.Propagation); p != nil {
			opts = append(opts, task.WithHistoryPropagation(p))
		}
		return ctx.CallActivity(s.Name, opts...), nil
	case "call_child":
		input, err := evaluate(s.Input, env)
		if err != nil {
			return nil, err
		}
		var opts []task.ChildWorkflowOption
		if input != nil {
			opts = append(opts, task.WithRawChildWorkflowInput(rawPayload(input)))
		}
		if s.InstanceID != nil {
			iid, err := evaluate(s.InstanceID, env)
			if err != nil {
				return nil, err
			}
			if iid != nil {
				opts = append(opts, task.WithChildWorkflowInstanceID(text(iid)))
			}
		}
		if p := retryPolicy(s.Retry); p != nil {
			opts = append(opts, task.WithChildWorkflowRetryPolicy(p))
		}
		if s.App != nil {
			opts = append(opts, task.WithChildWorkflowAppID(*s.App))
		}
		if p := propagation(s.Propagation); p != nil {
			opts = append(opts, task.WithHistoryPropagation(p))
		}
		return ctx.CallChildWorkflow(s.Workflow, opts...), nil
	case "timer":
		return ctx.CreateTimer(seconds(s.Duration)), nil
	case "wait_event":
		timeout := time.Duration(-1) // negative: wait forever
		if s.Timeout != nil {
			timeout = seconds(*s.Timeout)
		}
		return ctx.WaitForSingleEvent(s.Name, timeout), nil
	}
	return nil, fmt.Errorf("%s is not a task", s.Step)
}

// await waits for a task and decodes its JSON result (nil when there is none).
func await(t task.Task) (any, error) {
	var raw json.RawMessage
	if err := t.Await(&raw); err != nil {
		return nil, err
	}
	return decodeValue(raw)
}

func runSteps(ctx *task.WorkflowContext, steps []*Step, env map[string]any) (returned, error) {
	for _, s := range steps {
		switch s.Step {
		case "call_activity", "call_child", "timer", "wait_event":
			t, err := makeTask(ctx, s, env)
			if err != nil {
				return returned{}, err
			}
			value, err := await(t)
			if err != nil {
				if s.Step == "wait_event" && s.Default != nil && errors.Is(err, task.ErrTaskCanceled) {
					if value, err = evaluate(s.Default, env); err != nil {
						return returned{}, err
					}
				} else {
					return returned{}, err
				}
			}
			if s.As != nil {
				env[*s.As] = value
			}
		case "all":
			// durabletask-go has no WhenAll: a fan-in is every task scheduled first, then awaited in
			// order (the SDK's own samples/parallel). The first failure in task order fails the step.
			tasks := make([]task.Task, len(s.Tasks))
			for i, ts := range s.Tasks {
				t, err := makeTask(ctx, ts, env)
				if err != nil {
					return returned{}, err
				}
				tasks[i] = t
			}
			values := make([]any, len(tasks))
			for i, t := range tasks {
				v, err := await(t)
				if err != nil {
					return returned{}, err
				}
				values[i] = v
			}
			if s.As != nil {
				env[*s.As] = values
			}
		case "if_patched", "if":
			var on bool
			if s.Step == "if_patched" {
				on = ctx.IsPatched(s.Patch)
			} else {
				cond, err := evaluate(s.Cond, env)
				if err != nil {
					return returned{}, err
				}
				on = truthy(cond)
			}
			branch := s.Else
			if on {
				branch = s.Then
			}
			out, err := runSteps(ctx, branch, env)
			if err != nil || out.done {
				return out, err
			}
		case "spawn":
			// A detached workflow (task/detached.go): an action, no task. Without instance_id the SDK
			// names it "<instance id>-<n>"; an empty id is the SDK's error, which fails the workflow.
			input, err := evaluate(s.Input, env)
			if err != nil {
				return returned{}, err
			}
			var iid *string
			if s.InstanceID != nil {
				v, err := evaluate(s.InstanceID, env)
				if err != nil {
					return returned{}, err
				}
				if v != nil {
					t := text(v)
					iid = &t
				}
			}
			id, err := spawnDetached(ctx, s.Workflow, input, iid)
			if err != nil {
				return returned{}, err
			}
			if s.As != nil {
				env[*s.As] = string(id)
			}
		case "set":
			v, err := evaluate(s.Value, env)
			if err != nil {
				return returned{}, err
			}
			env[s.Var] = v
		case "set_status":
			v, err := evaluate(s.Value, env)
			if err != nil {
				return returned{}, err
			}
			// A string as it is, anything else as JSON text. null clears the status: the closest
			// durabletask-go has is "", since it always sends customStatus.
			switch x := v.(type) {
			case nil:
				ctx.SetCustomStatus("")
			case string:
				ctx.SetCustomStatus(x)
			default:
				ctx.SetCustomStatus(jsonText(x))
			}
		case "continue_as_new":
			input, err := evaluate(s.Input, env)
			if err != nil {
				return returned{}, err
			}
			var opts []task.ContinueAsNewOption
			if s.CarryEvents {
				opts = append(opts, task.WithKeepUnprocessedEvents())
			}
			var newInput any
			if input != nil {
				newInput = input
			}
			ctx.ContinueAsNew(newInput, opts...)
			return returned{done: true}, nil
		case "return":
			v, err := evaluate(s.Value, env)
			if err != nil {
				return returned{}, err
			}
			return returned{done: true, value: v}, nil
		case "fail":
			msg, err := evaluate(s.Message, env)
			if err != nil {
				return returned{}, err
			}
			return returned{}, ProgramFailure{Type: s.Type, Message: text(msg)}
		default: // capabilityGaps() refuses these before start
			return returned{}, fmt.Errorf("step kind %q is not supported by this driver", s.Step)
		}
	}
	return returned{}, nil
}
