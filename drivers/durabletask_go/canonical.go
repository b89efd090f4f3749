package main

// The canonical program form (docs/programs.md "The canonical form"), the file the harness writes as
// {canonical}: one shape per step, every default filled in, durations in seconds, expressions as
// canonical nodes (values.go evaluates them). The driver parses no shorthand and fills in no default.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
)

const (
	canonicalFormat  = "taskhub-programs/canonical"
	canonicalVersion = 1
)

type Retry struct {
	MaxAttempts int      `json:"max_attempts"`
	FirstDelay  float64  `json:"first_delay"` // seconds
	Backoff     float64  `json:"backoff"`
	MaxDelay    *float64 `json:"max_delay"` // nil: no limit
	Timeout     *float64 `json:"timeout"`   // nil: none (capability retry_timeout)
}

// Step is one step; Step.Step is its kind and decides which fields it has (the others are zero).
type Step struct {
	Step        string   `json:"step"`
	As          *string  `json:"as"`
	Name        string   `json:"name"`        // call_activity, wait_event
	Input       *Node    `json:"input"`       // call_activity, call_child, spawn, continue_as_new
	Retry       *Retry   `json:"retry"`       // call_activity, call_child
	App         *string  `json:"app"`         // call_activity, call_child (nil: the caller's own app)
	Propagation *string  `json:"propagation"` // call_activity, call_child: "own" | "lineage" | "none" (nil: none)
	Workflow    string   `json:"workflow"`    // call_child, spawn
	InstanceID  *Node    `json:"instance_id"` // call_child, spawn (nil: the default id)
	Duration    float64  `json:"duration"`    // timer
	Timeout     *float64 `json:"timeout"`     // wait_event (nil: forever)
	Default     *Node    `json:"default"`     // wait_event (nil: none)
	Tasks       []*Step  `json:"tasks"`       // all, any
	Patch       string   `json:"patch"`       // if_patched
	Cond        *Node    `json:"cond"`        // if
	Then        []*Step  `json:"then"`        // if, if_patched
	Else        []*Step  `json:"else"`
	Var         string   `json:"var"`   // set
	Value       *Node    `json:"value"` // set, set_status, return
	CarryEvents bool     `json:"carry_events"`
	Message     *Node    `json:"message"` // fail
	Type        string   `json:"type"`
}

type Version struct {
	Name  *string `json:"name"` // nil: an unversioned program
	Steps []*Step `json:"steps"`
}

type Family struct {
	Default  *string    `json:"default"` // nil: an unversioned program (one version, Name nil)
	Versions []*Version `json:"versions"`
}

type Programs map[string]*Family

// readPrograms reads a {canonical} file; an error says what is wrong with it (exit 2).
func readPrograms(path string) (Programs, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read the canonical programs: %v", err)
	}
	return decodePrograms(data, path)
}

func decodePrograms(data []byte, source string) (Programs, error) {
	var doc struct {
		Format   string   `json:"format"`
		Version  int      `json:"version"`
		Programs Programs `json:"programs"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err := dec.Decode(&doc)
	if err == nil && (doc.Format != canonicalFormat || doc.Version != canonicalVersion || doc.Programs == nil) {
		err = fmt.Errorf("format %q version %d", doc.Format, doc.Version)
	}
	if err != nil {
		return nil, fmt.Errorf("%s is not the canonical program form (format %s, version %d): %v; pass the file "+
			"the harness writes as {canonical} (taskhub_programs.canonical_form), not the bundle",
			source, canonicalFormat, canonicalVersion, err)
	}
	return doc.Programs, nil
}
