package main

// The values of the program language and what expressions do with them (docs/programs.md
// "Expressions" and "Values"). A value is what encoding/json decodes: nil, bool, float64, string,
// []any, map[string]any. Its text is encoding/json's (keys sorted), without HTML escaping.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// ExpressionError fails the workflow (the SDK reports its Go type name as the errorType).
type ExpressionError struct{ Msg string }

func (e ExpressionError) Error() string { return e.Msg }

// Node is a canonical expression node (canonical.go), decoded as a value.
type Node struct{ v any }

func (n *Node) UnmarshalJSON(data []byte) error { return json.Unmarshal(data, &n.v) }

// decodeValue decodes a payload; an absent or empty one is nil.
func decodeValue(data []byte) (any, error) {
	var v any
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	err := json.Unmarshal(data, &v)
	return v, err
}

// jsonText is a value as JSON text; text is a string as it is, anything else as JSON text.
func jsonText(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil { // NaN or an infinity: JSON has none (JSON.stringify writes null)
		return "null"
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func text(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return jsonText(v)
}

func truncate(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n])
	}
	return s
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "list"
	case map[string]any:
		return "mapping"
	case float64:
		return "number"
	}
	return fmt.Sprintf("%T", v)
}

// number: a number, or a boolean as 1 or 0.
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

func truthy(v any) bool {
	if n, ok := number(v); ok {
		return n != 0
	}
	switch x := v.(type) {
	case nil:
		return false
	case string:
		return x != ""
	case []any:
		return len(x) > 0
	case map[string]any:
		return len(x) > 0
	}
	return true
}

func equal(a, b any) bool {
	if x, ok := number(a); ok {
		y, ok := number(b)
		return ok && x == y
	}
	switch x := a.(type) {
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equal(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if w, ok := y[k]; !ok || !equal(v, w) {
				return false
			}
		}
		return true
	}
	return a == b
}

// compare orders numbers, strings (by code point: Go compares UTF-8 bytes) and lists item by item.
func compare(a, b any) (int, bool) {
	if x, ok := number(a); ok {
		if y, ok := number(b); ok {
			switch {
			case x < y:
				return -1, true
			case x > y:
				return 1, true
			}
			return 0, true
		}
		return 0, false
	}
	switch x := a.(type) {
	case string:
		if y, ok := b.(string); ok {
			return strings.Compare(x, y), true
		}
	case []any:
		if y, ok := b.([]any); ok {
			for i := 0; i < len(x) && i < len(y); i++ {
				if !equal(x[i], y[i]) {
					return compare(x[i], y[i])
				}
			}
			return compare(float64(len(x)), float64(len(y)))
		}
	}
	return 0, false
}

// items is what an operator that asks for a list sees: a string's characters, a mapping's keys sorted.
func items(v any) ([]any, bool) {
	switch x := v.(type) {
	case []any:
		return x, true
	case string:
		out := []any{}
		for _, r := range x {
			out = append(out, string(r))
		}
		return out, true
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		out := make([]any, len(keys))
		for i, k := range keys {
			out[i] = k
		}
		return out, true
	}
	return nil, false
}

// evaluate is the value of a canonical node on these variables (ExpressionError if it has none).
func evaluate(n *Node, env map[string]any) (any, error) {
	return evalNode(n.v, env)
}

func evalNode(node any, env map[string]any) (any, error) {
	m, _ := node.(map[string]any)
	switch {
	case m == nil:
	case has(m, "lit"):
		return m["lit"], nil
	case has(m, "int"):
		return m["int"], nil
	case has(m, "float"):
		return m["float"], nil
	case has(m, "list"), has(m, "text"):
		list, _ := m["list"].([]any)
		if has(m, "text") {
			list, _ = m["text"].([]any)
		}
		out := make([]any, len(list))
		var b strings.Builder
		for i, item := range list {
			v, err := evalNode(item, env)
			if err != nil {
				return nil, err
			}
			out[i] = v
			b.WriteString(text(v))
		}
		if has(m, "text") {
			return b.String(), nil
		}
		return out, nil
	case has(m, "map"):
		pairs, _ := m["map"].([]any)
		out := map[string]any{}
		for _, p := range pairs {
			kv, _ := p.([]any)
			if len(kv) != 2 {
				return nil, ExpressionError{"a map node's pair is not [key, node]"}
			}
			v, err := evalNode(kv[1], env)
			if err != nil {
				return nil, err
			}
			out[fmt.Sprint(kv[0])] = v
		}
		return out, nil
	case has(m, "var"):
		path, _ := m["path"].([]any)
		return lookup(fmt.Sprint(m["var"]), path, env)
	case has(m, "op"):
		v, err := evalNode(m["arg"], env)
		if err != nil {
			return nil, err
		}
		out, ok := apply("$"+fmt.Sprint(m["op"]), v)
		if !ok {
			return nil, ExpressionError{fmt.Sprintf("$%v cannot be applied to %s", m["op"], truncate(jsonText(v), 80))}
		}
		return out, nil
	}
	return nil, ExpressionError{"not an expression node: " + truncate(jsonText(node), 80)}
}

func has(m map[string]any, k string) bool {
	_, ok := m[k]
	return ok
}

func lookup(head string, path []any, env map[string]any) (any, error) {
	written := "${" + head
	for _, p := range path {
		written += "." + fmt.Sprint(p)
	}
	written += "}"
	value, ok := env[head]
	if !ok {
		names := make([]string, 0, len(env))
		for k := range env {
			names = append(names, k)
		}
		sort.Strings(names)
		return nil, ExpressionError{fmt.Sprintf("unknown variable '%s' in '%s'; known: %s", head, written,
			strings.Join(names, ", "))}
	}
	for _, p := range path {
		part := fmt.Sprint(p)
		if list, isList := value.([]any); isList {
			if i, err := strconv.Atoi(part); err == nil && -len(list) <= i && i < len(list) {
				value = list[(i+len(list))%len(list)]
				continue
			}
		}
		if m, isMap := value.(map[string]any); isMap {
			if v, ok := m[part]; ok {
				value = v
				continue
			}
		}
		return nil, ExpressionError{fmt.Sprintf("'%s': '%s' not found in %s", written, part, truncate(jsonText(value), 80))}
	}
	return value, nil
}

// apply is an operator on its argument's value; false when it is not defined there.
func apply(op string, arg any) (any, bool) {
	switch op {
	case "$add", "$concat", "$sum":
		xs, ok := items(arg)
		if !ok {
			return nil, false
		}
		joined := op == "$concat"
		for _, x := range xs {
			_, isString := x.(string)
			joined = joined || (isString && op == "$add")
		}
		if joined {
			var b strings.Builder
			for _, x := range xs {
				b.WriteString(text(x))
			}
			return b.String(), true
		}
		total := 0.0
		for _, x := range xs {
			n, ok := number(x)
			if !ok {
				return nil, false
			}
			total += n
		}
		return total, true
	case "$sub", "$lt", "$le", "$eq":
		xs, ok := arg.([]any)
		if s, isString := arg.(string); isString {
			xs, ok = items(s)
		}
		if !ok || len(xs) < 2 {
			return nil, false
		}
		switch op {
		case "$eq":
			return equal(xs[0], xs[1]), true
		case "$sub":
			a, okA := number(xs[0])
			b, okB := number(xs[1])
			return a - b, okA && okB
		}
		c, ok := compare(xs[0], xs[1])
		if op == "$lt" {
			return c < 0, ok
		}
		return c <= 0, ok
	case "$not":
		return !truthy(arg), true
	case "$len":
		if _, isList := arg.([]any); isList {
			xs, _ := items(arg)
			return float64(len(xs)), true
		}
		if _, isMap := arg.(map[string]any); isMap {
			xs, _ := items(arg)
			return float64(len(xs)), true
		}
		if s, isString := arg.(string); isString {
			return float64(len([]rune(s))), true
		}
	}
	return nil, false
}
