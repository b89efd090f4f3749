//go:build nodetached

package main

import (
	"errors"

	"github.com/dapr/durabletask-go/task"
)

// detachedWorkflows: built against a durabletask-go release without task/detached.go; capabilityGaps
// refuses any program with a spawn step before the driver starts, so spawnDetached is never reached.
const detachedWorkflows = false

func spawnDetached(*task.WorkflowContext, string, any, *string) (string, error) {
	return "", errors.New("this durabletask-go release has no detached workflows")
}
