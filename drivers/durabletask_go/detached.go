//go:build !nodetached

package main

import "github.com/dapr/durabletask-go/task"

// detachedWorkflows: this build's durabletask-go has WorkflowContext.ScheduleNewWorkflow (task/detached.go).
// Releases before it are built with -tags nodetached (scripts/install-go-driver.sh looks for the file),
// and the driver then refuses a spawn step as a capability gap instead of failing to compile.
const detachedWorkflows = true

// spawnDetached starts a detached workflow: an action, no task. A nil instanceID lets the SDK name it
// "<instance id>-<n>".
func spawnDetached(ctx *task.WorkflowContext, workflow string, input any, instanceID *string) (string, error) {
	var opts []task.DetachedWorkflowOptions
	if input != nil {
		opts = append(opts, task.WithRawDetachedWorkflowInput(rawPayload(input)))
	}
	if instanceID != nil {
		opts = append(opts, task.WithDetachedWorkflowInstanceID(*instanceID))
	}
	id, err := ctx.ScheduleNewWorkflow(workflow, opts...)
	return string(id), err
}
