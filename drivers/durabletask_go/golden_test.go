package main

// The driver against the cross-language golden file tests/programs/golden/programs.json: every
// expression's canonical node, evaluated in the file's env, gives the recorded value, text and
// truthiness, or an ExpressionError; each built-in activity case its recorded outcome on every
// execution (errorType without the Go package: the SDK reports "main.ActivityFailure"); and the
// file's canonical programs load.

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/dapr/durabletask-go/api"
	"github.com/dapr/durabletask-go/api/protos"
)

const goldenFile = "../../tests/programs/golden/programs.json"

type golden struct {
	Env         map[string]any `json:"env"`
	Expressions []struct {
		Expr      any    `json:"expr"`
		Canonical any    `json:"canonical"`
		Value     any    `json:"value"`
		Text      string `json:"text"`
		Truthy    bool   `json:"truthy"`
		Error     string `json:"error"`
	} `json:"expressions"`
	Activities []struct {
		Activity   string           `json:"activity"`
		Input      any              `json:"input"`
		Executions []map[string]any `json:"executions"`
	} `json:"activities"`
}

func readGolden(t *testing.T) golden {
	data, err := os.ReadFile(goldenFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc golden
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

func TestExpressionsMatchTheGoldenFile(t *testing.T) {
	doc := readGolden(t)
	if len(doc.Expressions) < 80 {
		t.Fatalf("only %d expressions in %s", len(doc.Expressions), goldenFile)
	}
	for i, c := range doc.Expressions {
		where := jsonText(c.Expr)
		got, err := evalNode(c.Canonical, doc.Env)
		if c.Error != "" {
			if ee := (ExpressionError{}); !errors.As(err, &ee) {
				t.Errorf("expressions[%d] %s: got %s (err %v), want an ExpressionError", i, where, jsonText(got), err)
			}
			continue
		}
		if err != nil {
			t.Errorf("expressions[%d] %s: %v, want %s", i, where, err, jsonText(c.Value))
			continue
		}
		if !equal(got, c.Value) || text(got) != c.Text || truthy(got) != c.Truthy {
			t.Errorf("expressions[%d] %s: value %s text %q truthy %v, want %s %q %v", i, where, jsonText(got), text(got),
				truthy(got), jsonText(c.Value), c.Text, c.Truthy)
		}
	}
}

func TestBuiltinActivitiesMatchTheGoldenFile(t *testing.T) {
	doc := readGolden(t)
	for _, c := range doc.Activities {
		// propagated: builtin gives the value without a received history (null); with one, see
		// TestPropagatedSummary.
		for i, want := range c.Executions {
			got := map[string]any{}
			result, sleep, err := builtin(c.Activity, c.Input, i+1)
			switch e := err.(type) {
			case nil:
				got["result"], got["sleep"] = result, sleep
			case ActivityFailure:
				got["error_type"], got["error_message"] = "ActivityFailure", e.Message
			case ActivityInputError:
				got["error_type"], got["error_message"] = "ActivityInputError", e.Message
			default:
				got["error_type"], got["error_message"] = fmt.Sprintf("%T", err), err.Error()
			}
			if jsonText(got) != jsonText(want) {
				t.Errorf("%s(%s) execution %d: %s, want %s", c.Activity, jsonText(c.Input), i+1, jsonText(got), jsonText(want))
			}
		}
	}
}

func TestTheGoldenProgramsLoad(t *testing.T) {
	data, err := os.ReadFile(goldenFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct{ Canonical json.RawMessage }
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	programs, err := decodePrograms(doc.Canonical, goldenFile)
	if err != nil {
		t.Fatal(err)
	}
	if v := programs["versioned"]; v == nil || *v.Default != "v2" || len(v.Versions) != 2 {
		t.Errorf("versioned: %+v", v)
	}
	gaps := strings.Join(capabilityGaps(programs), "\n")
	if !strings.Contains(gaps, "$.programs.every_step.steps[10].any:") {
		t.Errorf("the 'any' step is not named in the gaps:\n%s", gaps)
	}
	if strings.Contains(gaps, "spawner") { // ScheduleNewWorkflow expresses spawn
		t.Errorf("a spawn is named in the gaps:\n%s", gaps)
	}
	if _, err := decodePrograms([]byte(`{"programs": {}}`), "x.json"); err == nil ||
		!strings.Contains(err.Error(), "not the canonical program form") {
		t.Errorf("a bundle is read as the canonical form: %v", err)
	}
}

// The `propagated` value of a history as the SDK decodes it from the wire (api.PropagatedHistoryFromProto,
// what task/executor.go hands the activity context): scope and chunks in the order received.
func TestPropagatedSummary(t *testing.T) {
	if got := propagatedSummary(nil); got != nil {
		t.Errorf("no history: %s, want null", jsonText(got))
	}
	event, err := proto.Marshal(&protos.HistoryEvent{EventId: 0})
	if err != nil {
		t.Fatal(err)
	}
	ph, err := api.PropagatedHistoryFromProto(&protos.PropagatedHistory{
		Scope: protos.HistoryPropagationScope_HISTORY_PROPAGATION_SCOPE_LINEAGE,
		Chunks: []*protos.PropagatedHistoryChunk{
			{AppId: "app-a", InstanceId: "root", WorkflowName: "parent", RawEvents: [][]byte{event, event}},
			{AppId: "app-b", InstanceId: "root:0001", WorkflowName: "child", RawEvents: [][]byte{event}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"chunks":[{"app":"app-a","instance":"root","workflow":"parent"},` +
		`{"app":"app-b","instance":"root:0001","workflow":"child"}],"scope":"lineage"}`
	if got := jsonText(propagatedSummary(ph)); got != want {
		t.Errorf("lineage history: %s, want %s", got, want)
	}
	if got := scopeName(protos.HistoryPropagationScope_HISTORY_PROPAGATION_SCOPE_OWN_HISTORY); got != "own" {
		t.Errorf("OWN_HISTORY: %q, want own", got)
	}
}
