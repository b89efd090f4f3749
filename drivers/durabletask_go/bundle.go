package main

// The program bundle (docs/programs.md): parsed from the JSON file the harness writes
// ({"programs": {...}}, the scenario's programs as written). fake_worker/programs.py is the
// authority on the language; the harness has already validated the bundle with it, so this parser
// mirrors its rules and shorthands, reports what it cannot read as a bundle error (exit 2), and
// reports keys it does not know (a language extension this driver predates) as capability gaps
// (exit 3), never ignoring them.

import (
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
)

type Retry struct {
	MaxAttempts int
	FirstDelay  float64 // seconds
	Backoff     float64
	MaxDelay    *float64
}

// Step is one step of a program; Kind is its step key and decides which fields are used.
type Step struct {
	Kind string
	Path string // "$.programs.main.steps[0].call_activity", for messages
	As   string

	Name       string // call_activity, wait_event
	Input      any    // call_activity, call_child, continue_as_new
	Retry      *Retry // call_activity, call_child
	Workflow   string // call_child
	InstanceID any    // call_child (nil: none)
	Duration   float64
	Timeout    *float64 // wait_event (nil: forever)
	Default    any
	HasDefault bool
	Tasks      []*Step // all, any
	Patch      string  // if_patched
	Cond       any     // if
	Then, Else []*Step
	Var        string // set
	Value      any    // set, set_status, return
	Carry      bool   // continue_as_new
	Message    any    // fail
	Type       string // fail
}

type Program struct {
	Name    string
	Version string // "" when unversioned
	Steps   []*Step
}

type Family struct {
	Name     string
	Versions map[string]*Program
	Order    []string // version names in document order
	Default  string   // "" when unversioned
}

type Bundle struct {
	Families []*Family
}

type bundleParser struct {
	problems []string // malformed: exit 2
	unknown  []string // keys this driver does not know: exit 3
}

func (p *bundleParser) err(path, format string, args ...any) {
	p.problems = append(p.problems, path+": "+fmt.Sprintf(format, args...))
}

func (p *bundleParser) extension(path, format string, args ...any) {
	p.unknown = append(p.unknown, path+": "+fmt.Sprintf(format, args...))
}

// BundleError lists every problem found; Gap says whether they are unknown keys (exit 3).
type BundleError struct {
	Problems []string
	Gap      bool
}

func (e *BundleError) Error() string {
	s := fmt.Sprintf("%d problem(s)", len(e.Problems))
	for _, p := range e.Problems {
		s += "\n  - " + p
	}
	return s
}

func loadBundle(path string) (*Bundle, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &BundleError{Problems: []string{fmt.Sprintf("cannot read the program bundle: %v", err)}}
	}
	doc, err := pyLoads(data)
	if err != nil {
		return nil, &BundleError{Problems: []string{fmt.Sprintf("%s: not valid JSON (only .json bundles are read): %v", path, err)}}
	}
	return parseBundle(doc)
}

func parseBundle(doc any) (*Bundle, error) {
	p := &bundleParser{}
	b := p.bundle(doc)
	if len(p.problems) > 0 {
		return nil, &BundleError{Problems: p.problems}
	}
	if len(p.unknown) > 0 {
		return nil, &BundleError{Problems: p.unknown, Gap: true}
	}
	return b, nil
}

func (p *bundleParser) bundle(doc any) *Bundle {
	m, ok := doc.(*OMap)
	if !ok {
		p.err("$", "a program bundle is a mapping with a 'programs' key")
		return nil
	}
	progs, ok := m.Get("programs")
	if !ok {
		p.err("$", "a program bundle is a mapping with a 'programs' key")
		return nil
	}
	for _, k := range m.Keys() {
		if k != "programs" && k != "$schema" {
			p.extension("$", "unknown key %s", pyStrRepr(k))
		}
	}
	pm, ok := progs.(*OMap)
	if !ok || pm.Len() == 0 {
		p.err("$.programs", "must be a non-empty mapping of workflow name to program")
		return nil
	}
	b := &Bundle{}
	for _, name := range pm.Keys() {
		body, _ := pm.Get(name)
		if f := p.family(name, body, "$.programs."+name); f != nil {
			b.Families = append(b.Families, f)
		}
	}
	return b
}

func (p *bundleParser) family(name string, body any, path string) *Family {
	m, ok := body.(*OMap)
	if !ok {
		p.err(path, "must be a mapping with 'steps' or 'versions'")
		return nil
	}
	if versions, ok := m.Get("versions"); ok {
		for _, k := range m.Keys() {
			if k != "versions" && k != "default" {
				p.extension(path, "unknown key %s; a versioned program has 'versions' and 'default'", pyStrRepr(k))
			}
		}
		vm, ok := versions.(*OMap)
		if !ok || vm.Len() == 0 {
			p.err(path+".versions", "must be a non-empty mapping of version name to {steps: [...]}")
			return nil
		}
		f := &Family{Name: name, Versions: map[string]*Program{}}
		names := append([]string(nil), vm.Keys()...)
		sort.Strings(names)
		f.Default = names[len(names)-1]
		if d, ok := m.Get("default"); ok && d != nil {
			f.Default = pyStr(d)
			if _, ok := vm.Get(f.Default); !ok {
				p.err(path+".default", "names version %s, which is not one of %s", pyRepr(d), pyRepr(stringsToAny(names)))
			}
		}
		for _, vname := range vm.Keys() {
			vbody, _ := vm.Get(vname)
			vpath := path + ".versions." + vname
			vb, ok := vbody.(*OMap)
			if !ok || vb.Len() != 1 || vb.Keys()[0] != "steps" {
				p.err(vpath, "must be a mapping with exactly one key, 'steps'")
				continue
			}
			steps, _ := vb.Get("steps")
			f.Versions[vname] = &Program{Name: name, Version: vname, Steps: p.steps(steps, vpath+".steps")}
			f.Order = append(f.Order, vname)
		}
		return f
	}
	for _, k := range m.Keys() {
		if k != "steps" {
			p.extension(path, "unknown key %s; a program has 'steps' (or 'versions')", pyStrRepr(k))
		}
	}
	steps, _ := m.Get("steps")
	return &Family{Name: name, Versions: map[string]*Program{"": {Name: name, Steps: p.steps(steps, path+".steps")}},
		Order: []string{""}}
}

func stringsToAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

var (
	taskKinds = []string{"call_activity", "call_child", "timer", "wait_event"}
	stepKinds = append(append([]string(nil), taskKinds...),
		"all", "any", "if_patched", "if", "set", "set_status", "continue_as_new", "return", "fail")
	varPattern      = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	durationPattern = regexp.MustCompile(`^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$`)
	durationUnits   = map[string]float64{"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "": 1}
)

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (p *bundleParser) steps(raw any, path string) []*Step {
	if raw == nil {
		return nil
	}
	list, ok := raw.([]any)
	if !ok {
		p.err(path, "must be a list of steps")
		return nil
	}
	var out []*Step
	for i, item := range list {
		if s := p.step(item, fmt.Sprintf("%s[%d]", path, i), stepKinds); s != nil {
			out = append(out, s)
		}
	}
	return out
}

// kind returns the step key, its body and the optional `as`.
func (p *bundleParser) kind(item any, path string, allowed []string) (string, any, string, bool) {
	m, ok := item.(*OMap)
	if !ok {
		p.err(path, "a step is a mapping with one of %v", allowed)
		return "", nil, "", false
	}
	var keys []string
	for _, k := range m.Keys() {
		if k != "as" {
			keys = append(keys, k)
		}
	}
	if len(keys) != 1 {
		p.err(path, "a step has exactly one of %v (plus optional 'as'); got %v", allowed, m.Keys())
		return "", nil, "", false
	}
	if !contains(allowed, keys[0]) {
		if contains(stepKinds, keys[0]) {
			p.err(path, "%s is not allowed here; allowed: %v", pyStrRepr(keys[0]), allowed)
		} else {
			p.extension(path, "step kind %s is unknown to this driver (a language extension it predates)", pyStrRepr(keys[0]))
		}
		return "", nil, "", false
	}
	as := ""
	if a, ok := m.Get("as"); ok && a != nil {
		s, isStr := a.(string)
		if !isStr || !varPattern.MatchString(s) {
			p.err(path+".as", "%s is not a variable name (letters, digits, '_')", pyRepr(a))
		} else {
			as = s
		}
	}
	body, _ := m.Get(keys[0])
	return keys[0], body, as, true
}

func (p *bundleParser) step(item any, path string, allowed []string) *Step {
	kind, body, as, ok := p.kind(item, path, allowed)
	if !ok {
		return nil
	}
	sp := path + "." + kind
	if contains(taskKinds, kind) {
		return p.task(kind, body, sp, as)
	}
	s := &Step{Kind: kind, Path: sp, As: as}
	switch kind {
	case "all", "any":
		list, ok := body.([]any)
		if !ok || len(list) == 0 {
			p.err(sp, "must be a non-empty list of tasks (call_activity, call_child, timer, wait_event)")
			return nil
		}
		for i, t := range list {
			tp := fmt.Sprintf("%s[%d]", sp, i)
			tk, tbody, tas, ok := p.kind(t, tp, taskKinds)
			if !ok {
				continue
			}
			if tas != "" {
				p.err(tp+".as", "tasks inside all/any have no 'as'; name the all/any step instead")
			}
			if task := p.task(tk, tbody, tp+"."+tk, ""); task != nil {
				s.Tasks = append(s.Tasks, task)
			}
		}
		return s
	}
	if as != "" {
		p.err(path+".as", "%s produces no value to store", pyStrRepr(kind))
	}
	switch kind {
	case "if_patched":
		m := p.mapping(body, sp, []string{"patch"}, []string{"then", "else"})
		if m == nil {
			return nil
		}
		patch, _ := m.Get("patch")
		s.Patch = pyStr(patch)
		then, _ := m.Get("then")
		els, _ := m.Get("else")
		s.Then, s.Else = p.steps(then, sp+".then"), p.steps(els, sp+".else")
	case "if":
		m := p.mapping(body, sp, []string{"cond"}, []string{"then", "else"})
		if m == nil {
			return nil
		}
		s.Cond, _ = m.Get("cond")
		then, _ := m.Get("then")
		els, _ := m.Get("else")
		s.Then, s.Else = p.steps(then, sp+".then"), p.steps(els, sp+".else")
	case "set":
		m := p.mapping(body, sp, []string{"var", "value"}, nil)
		if m == nil {
			return nil
		}
		v, _ := m.Get("var")
		name, isStr := v.(string)
		if !isStr || !varPattern.MatchString(name) {
			p.err(sp+".var", "%s is not a variable name", pyRepr(v))
		}
		s.Var = pyStr(v)
		s.Value, _ = m.Get("value")
	case "set_status":
		s.Value = body
	case "continue_as_new":
		if body == nil {
			body = NewOMap()
		}
		m := p.mapping(body, sp, nil, []string{"input", "carry_events"})
		if m == nil {
			return nil
		}
		s.Input, _ = m.Get("input")
		if c, ok := m.Get("carry_events"); ok {
			b, isBool := c.(bool)
			if !isBool {
				p.err(sp+".carry_events", "must be true or false")
			}
			s.Carry = b
		}
	case "return":
		s.Value = body
	case "fail":
		s.Type = "ProgramFailure"
		if str, ok := body.(string); ok {
			s.Message = str
			break
		}
		m := p.mapping(body, sp, []string{"message"}, []string{"type"})
		if m == nil {
			return nil
		}
		s.Message, _ = m.Get("message")
		if t, ok := m.Get("type"); ok {
			s.Type = pyStr(t)
		}
	}
	return s
}

func (p *bundleParser) task(kind string, body any, path, as string) *Step {
	s := &Step{Kind: kind, Path: path, As: as}
	switch kind {
	case "call_activity":
		m := p.mapping(body, path, []string{"name"}, []string{"input", "retry"})
		if m == nil {
			return nil
		}
		name, _ := m.Get("name")
		s.Name = pyStr(name)
		s.Input, _ = m.Get("input")
		r, _ := m.Get("retry")
		s.Retry = p.retry(r, path+".retry")
	case "call_child":
		m := p.mapping(body, path, []string{"workflow"}, []string{"input", "instance_id", "retry"})
		if m == nil {
			return nil
		}
		wf, _ := m.Get("workflow")
		s.Workflow = pyStr(wf)
		s.Input, _ = m.Get("input")
		s.InstanceID, _ = m.Get("instance_id")
		r, _ := m.Get("retry")
		s.Retry = p.retry(r, path+".retry")
	case "timer":
		if _, ok := body.(*OMap); !ok {
			m := NewOMap()
			m.Set("duration", body)
			body = m
		}
		m := p.mapping(body, path, []string{"duration"}, nil)
		if m == nil {
			return nil
		}
		d, _ := m.Get("duration")
		s.Duration = p.duration(d, path+".duration")
	case "wait_event":
		if str, ok := body.(string); ok {
			m := NewOMap()
			m.Set("name", str)
			body = m
		}
		m := p.mapping(body, path, []string{"name"}, []string{"timeout", "default"})
		if m == nil {
			return nil
		}
		name, _ := m.Get("name")
		s.Name = pyStr(name)
		if t, ok := m.Get("timeout"); ok && t != nil {
			d := p.duration(t, path+".timeout")
			s.Timeout = &d
		}
		s.Default, s.HasDefault = m.Get("default")
	}
	return s
}

func (p *bundleParser) retry(raw any, path string) *Retry {
	if raw == nil {
		return nil
	}
	m := p.mapping(raw, path, []string{"max_attempts", "first_delay"}, []string{"backoff", "max_delay"})
	if m == nil {
		return nil
	}
	r := &Retry{Backoff: 1}
	a, _ := m.Get("max_attempts")
	if n, ok := a.(int64); ok && n >= 1 {
		r.MaxAttempts = int(n)
	} else {
		p.err(path+".max_attempts", "%s must be a whole number >= 1", pyRepr(a))
	}
	if b, ok := m.Get("backoff"); ok {
		n, isNum := asNumber(b)
		if _, isBool := b.(bool); !isNum || isBool || n.float() < 1 {
			p.err(path+".backoff", "%s must be a number >= 1", pyRepr(b))
		} else {
			r.Backoff = n.float()
		}
	}
	fd, _ := m.Get("first_delay")
	r.FirstDelay = p.duration(fd, path+".first_delay")
	if md, ok := m.Get("max_delay"); ok && md != nil {
		d := p.duration(md, path+".max_delay")
		r.MaxDelay = &d
	}
	return r
}

func (p *bundleParser) duration(raw any, path string) float64 {
	d, err := parseDuration(raw)
	if err != nil {
		p.err(path, "%v", err)
	}
	return d
}

// parseDuration: seconds from a number or a string like '500ms', '2s', '1m', '1h', '1d'.
func parseDuration(raw any) (float64, error) {
	if _, isBool := raw.(bool); !isBool {
		if n, ok := asNumber(raw); ok {
			if n.float() < 0 {
				return 0, fmt.Errorf("duration %s is negative", pyRepr(raw))
			}
			return n.float(), nil
		}
	}
	if s, ok := raw.(string); ok {
		if m := durationPattern.FindStringSubmatch(s); m != nil {
			v, _ := strconv.ParseFloat(m[1], 64)
			return v * durationUnits[m[2]], nil
		}
	}
	return 0, fmt.Errorf("%s is not a duration (use seconds or a string like '500ms', '2s', '1m', '1h', '1d')", pyRepr(raw))
}

func (p *bundleParser) mapping(raw any, path string, required, optional []string) *OMap {
	m, ok := raw.(*OMap)
	if !ok {
		p.err(path, "must be a mapping with keys %v", append(append([]string(nil), required...), optional...))
		return nil
	}
	var missing []string
	for _, k := range required {
		if _, ok := m.Get(k); !ok {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		p.err(path, "missing required key(s) %v", missing)
		return nil
	}
	for _, k := range m.Keys() {
		if !contains(required, k) && !contains(optional, k) {
			p.extension(path, "key %s is unknown to this driver (a language extension it predates); known: %v",
				pyStrRepr(k), append(append([]string(nil), required...), optional...))
		}
	}
	return m
}
