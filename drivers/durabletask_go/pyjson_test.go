package main

import (
	"encoding/json"
	"os"
	"testing"
)

// testdata/python.json holds what Python gives (testdata/gen_python.py): json.dumps and str() of
// decoded JSON texts, and taskhub_programs.evaluate of expressions in one environment.
func loadPython(t *testing.T) *OMap {
	t.Helper()
	data, err := os.ReadFile("testdata/python.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := pyLoads(data)
	if err != nil {
		t.Fatal(err)
	}
	return doc.(*OMap)
}

func field(m any, k string) any {
	v, _ := m.(*OMap).Get(k)
	return v
}

func TestDumpsAndStrMatchPython(t *testing.T) {
	doc := loadPython(t)
	for _, c := range field(doc, "dumps").([]any) {
		src := field(c, "json").(string)
		v, err := pyLoads([]byte(src))
		if err != nil {
			t.Errorf("pyLoads(%s): %v", src, err)
			continue
		}
		if got, want := pyDumps(v), field(c, "dumps").(string); got != want {
			t.Errorf("pyDumps(%s) = %s, Python json.dumps gives %s", src, got, want)
		}
		if got, want := pyStr(v), field(c, "str").(string); got != want {
			t.Errorf("pyStr(%s) = %s, Python str gives %s", src, got, want)
		}
	}
}

func TestEvaluateMatchesPython(t *testing.T) {
	doc := loadPython(t)
	envMap := field(doc, "env").(*OMap)
	env := map[string]any{}
	for _, k := range envMap.Keys() {
		env[k], _ = envMap.Get(k)
	}
	for _, c := range field(doc, "expressions").([]any) {
		expr := field(c, "expr")
		got, err := evaluate(expr, env)
		if want, ok := c.(*OMap).Get("ok"); ok {
			if err != nil {
				t.Errorf("evaluate(%s): unexpected error %v; Python gives %s", pyDumps(expr), err, want)
			} else if pyDumps(got) != want.(string) {
				t.Errorf("evaluate(%s) = %s; Python gives %s", pyDumps(expr), pyDumps(got), want)
			}
			continue
		}
		want := field(c, "err").(string)
		if err == nil {
			t.Errorf("evaluate(%s) = %s; Python raises ExpressionError %q", pyDumps(expr), pyDumps(got), want)
		} else if _, isExpr := err.(ExpressionError); !isExpr || err.Error() != want {
			t.Errorf("evaluate(%s): error %T %q; Python raises ExpressionError %q", pyDumps(expr), err, err, want)
		}
	}
}

func TestPyJSONSurvivesEncodingJSON(t *testing.T) {
	// The SDK marshals results with encoding/json, which compacts a Marshaler's output: only the
	// separators' spaces may go, numbers and key order stay.
	v, _ := pyLoads([]byte(`{"z": 1.0, "a": [1e16, 2], "m": "x y"}`))
	b, err := json.Marshal(pyJSON{v})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `{"z":1.0,"a":[1e+16,2],"m":"x y"}`; got != want {
		t.Errorf("json.Marshal(pyJSON) = %s, want %s", got, want)
	}
}

func TestBundleShorthandsAndGaps(t *testing.T) {
	doc, err := pyLoads([]byte(`{"programs": {
	  "main": {"steps": [
	    {"timer": "1.5s"}, {"wait_event": "go", "as": "v"}, {"fail": "boom"}, {"continue_as_new": null},
	    {"call_activity": {"name": "fail", "input": 1, "retry": {"max_attempts": 3, "first_delay": "100ms", "backoff": 2}}},
	    {"if_patched": {"patch": "p1", "then": [{"any": [{"timer": 1}, {"wait_event": "x"}], "as": "w"}]}}]},
	  "versioned": {"versions": {"v1": {"steps": [{"return": 1}]}, "v2": {"steps": null}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := parseBundle(doc)
	if err != nil {
		t.Fatal(err)
	}
	steps := b.Families[0].Versions[""].Steps
	if steps[0].Duration != 1.5 || steps[1].Name != "go" || steps[1].As != "v" || steps[2].Message != "boom" ||
		steps[2].Type != "ProgramFailure" || steps[4].Retry.FirstDelay != 0.1 || steps[4].Retry.Backoff != 2 {
		t.Errorf("shorthands parsed wrongly: %+v %+v %+v %+v", steps[0], steps[1], steps[2], steps[4].Retry)
	}
	if f := b.Families[1]; f.Default != "v2" || len(f.Order) != 2 {
		t.Errorf("versioned family: default %q, versions %v", f.Default, f.Order)
	}
	gaps := capabilityGaps(b)
	if len(gaps) != 1 || gaps[0][:len("$.programs.main.steps[5].if_patched.then[0].any:")] !=
		"$.programs.main.steps[5].if_patched.then[0].any:" {
		t.Errorf("gaps = %q", gaps)
	}

	unknown, _ := pyLoads([]byte(`{"programs": {"main": {"steps": [{"call_activity": {"name": "echo", "priority": 1}}, {"spawn": 1}]}}}`))
	_, err = parseBundle(unknown)
	be, ok := err.(*BundleError)
	if !ok || !be.Gap || len(be.Problems) != 2 {
		t.Errorf("unknown keys: got %v", err)
	}
}
