package main

// The driver against the cross-language golden file tests/programs/golden/programs.json: every
// expression's canonical node, evaluated in the file's env, gives the recorded value, text,
// truthiness and display text, or an ExpressionError; and the file's canonical programs load.

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
)

const goldenFile = "../../tests/programs/golden/programs.json"

func field(m any, k string) any {
	v, _ := m.(*OMap).Get(k)
	return v
}

func TestExpressionsMatchTheGoldenFile(t *testing.T) {
	data, err := os.ReadFile(goldenFile)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := pyLoads(data)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]any{}
	for _, k := range field(doc, "env").(*OMap).Keys() {
		env[k] = field(field(doc, "env"), k)
	}
	cases := field(doc, "expressions").([]any)
	if len(cases) < 80 {
		t.Fatalf("only %d expressions in %s", len(cases), goldenFile)
	}
	for i, c := range cases {
		where := pyDumps(field(c, "expr"))
		got, err := evalNode(field(c, "canonical"), env)
		if _, wantErr := c.(*OMap).Get("error"); wantErr {
			if ee := (ExpressionError{}); !errors.As(err, &ee) {
				t.Errorf("expressions[%d] %s: got %s (err %v), want an ExpressionError", i, where, pyDumps(got), err)
			}
			continue
		}
		if err != nil {
			t.Errorf("expressions[%d] %s: %v, want %s", i, where, err, pyDumps(field(c, "value")))
			continue
		}
		want := field(c, "value")
		if !pyEqual(got, want) || pyDumps(got) != pyDumps(want) {
			t.Errorf("expressions[%d] %s: value %s, want %s", i, where, pyDumps(got), pyDumps(want))
		}
		if text(got) != field(c, "text") || pyStr(got) != field(c, "display") || pyTruthy(got) != field(c, "truthy") {
			t.Errorf("expressions[%d] %s: text %q display %q truthy %v, want %q %q %v", i, where, text(got), pyStr(got),
				pyTruthy(got), field(c, "text"), field(c, "display"), field(c, "truthy"))
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
	if _, err := decodePrograms([]byte(`{"programs": {}}`), "x.json"); err == nil ||
		!strings.Contains(err.Error(), "not the canonical program form") {
		t.Errorf("a bundle is read as the canonical form: %v", err)
	}
}
