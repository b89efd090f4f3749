package main

// Expressions of the program language (docs/programs.md "Expressions" and "Values"): canonical nodes
// (canonical.go) evaluated on the workflow's variables; the values and their text are pyjson.go's.

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// ExpressionError fails the workflow (the SDK reports its Go type name as the errorType).
type ExpressionError struct{ Msg string }

func (e ExpressionError) Error() string { return e.Msg }

// evaluate is the value of a canonical node on these variables (ExpressionError if it has none).
func evaluate(n *Node, env map[string]any) (any, error) {
	return evalNode(n.v, env)
}

func evalNode(node any, env map[string]any) (any, error) {
	m, _ := node.(*OMap)
	if m == nil || m.Len() == 0 {
		return nil, ExpressionError{"not an expression node: " + truncate(pyDumps(node), 80)}
	}
	arg, _ := m.Get(m.keys[0])
	switch m.keys[0] {
	case "lit", "int", "float":
		return arg, nil
	case "list", "text":
		items, _ := arg.([]any)
		out := make([]any, len(items))
		var b strings.Builder
		for i, item := range items {
			v, err := evalNode(item, env)
			if err != nil {
				return nil, err
			}
			out[i] = v
			b.WriteString(text(v))
		}
		if m.keys[0] == "text" {
			return b.String(), nil
		}
		return out, nil
	case "map":
		pairs, _ := arg.([]any)
		out := NewOMap()
		for _, p := range pairs {
			kv, _ := p.([]any)
			if len(kv) != 2 {
				return nil, ExpressionError{"a map node's pair is not [key, node]"}
			}
			v, err := evalNode(kv[1], env)
			if err != nil {
				return nil, err
			}
			out.Set(fmt.Sprint(kv[0]), v)
		}
		return out, nil
	case "var":
		path, _ := m.Get("path")
		parts, _ := path.([]any)
		return lookup(fmt.Sprint(arg), parts, env)
	case "op":
		operand, _ := m.Get("arg")
		v, err := evalNode(operand, env)
		if err != nil {
			return nil, err
		}
		return apply("$"+fmt.Sprint(arg), v)
	}
	return nil, ExpressionError{"not an expression node: " + truncate(pyDumps(node), 80)}
}

// text: strings as they are, anything else as JSON text.
func text(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return pyDumps(v)
}

func truncate(s string, n int) string {
	if len(s) > n { // pyDumps output is ASCII, so bytes are characters
		return s[:n]
	}
	return s
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
		if list, isList := value.([]any); isList && isIndex(part) {
			if i, err := strconv.Atoi(part); err == nil && -len(list) <= i && i < len(list) {
				if i < 0 {
					i += len(list)
				}
				value = list[i]
				continue
			}
		}
		if m, isMap := value.(*OMap); isMap {
			if v, ok := m.Get(part); ok {
				value = v
				continue
			}
		}
		return nil, ExpressionError{fmt.Sprintf("'%s': '%s' not found in %s", written, part, truncate(pyDumps(value), 80))}
	}
	return value, nil
}

// isIndex: an optional minus sign and digits (a list index in a reference path).
func isIndex(s string) bool {
	digits := strings.TrimPrefix(s, "-")
	return digits != "" && strings.Trim(digits, "0123456789") == ""
}

// iterate is Python's iteration over a value: list items, string characters, dict keys.
func iterate(v any) ([]any, error) {
	switch x := v.(type) {
	case []any:
		return x, nil
	case string:
		out := []any{}
		for _, r := range x {
			out = append(out, string(r))
		}
		return out, nil
	case *OMap:
		out := make([]any, 0, x.Len())
		for _, k := range x.keys {
			out = append(out, k)
		}
		return out, nil
	}
	return nil, fmt.Errorf("'%s' object is not iterable", pyTypeName(v))
}

// index is Python's arg[i] for the binary operators.
func index(v any, i int) (any, error) {
	switch x := v.(type) {
	case []any:
		if i < len(x) {
			return x[i], nil
		}
		return nil, fmt.Errorf("list index out of range")
	case string:
		rs := []rune(x)
		if i < len(rs) {
			return string(rs[i]), nil
		}
		return nil, fmt.Errorf("string index out of range")
	case *OMap:
		return nil, fmt.Errorf("%d", i) // KeyError(i)
	}
	return nil, fmt.Errorf("'%s' object is not subscriptable", pyTypeName(v))
}

func pySum(items []any) (any, error) {
	total := number{}
	for _, it := range items {
		n, ok := asNumber(it)
		if !ok {
			left := "int"
			if total.isFloat {
				left = "float"
			}
			return nil, fmt.Errorf("unsupported operand type(s) for +: '%s' and '%s'", left, pyTypeName(it))
		}
		total = total.add(n)
	}
	return total.value(), nil
}

func compare(op string, a, b any) (bool, error) {
	c, err := pyCompare(a, b)
	if err != nil {
		sym := "<"
		if op == "$le" {
			sym = "<="
		}
		return false, fmt.Errorf("'%s' not supported between instances of '%s' and '%s'", sym, pyTypeName(a), pyTypeName(b))
	}
	if c == 2 { // NaN
		return false, nil
	}
	if op == "$lt" {
		return c < 0, nil
	}
	return c <= 0, nil
}

// pyCompare orders numbers, strings and lists as Python does; anything else is a TypeError.
func pyCompare(a, b any) (int, error) {
	if na, ok := asNumber(a); ok {
		if nb, ok := asNumber(b); ok {
			return na.cmp(nb), nil
		}
		return 0, fmt.Errorf("unordered")
	}
	switch x := a.(type) {
	case string:
		if y, ok := b.(string); ok {
			return strings.Compare(x, y), nil
		}
	case []any:
		if y, ok := b.([]any); ok {
			for i := 0; i < len(x) && i < len(y); i++ {
				if pyEqual(x[i], y[i]) {
					continue
				}
				return pyCompare(x[i], y[i])
			}
			switch {
			case len(x) < len(y):
				return -1, nil
			case len(x) > len(y):
				return 1, nil
			}
			return 0, nil
		}
	}
	return 0, fmt.Errorf("unordered")
}

func apply(op string, arg any) (any, error) {
	v, err := applyOp(op, arg)
	if err != nil {
		return nil, ExpressionError{fmt.Sprintf("%s cannot be applied to %s: %v", op, truncate(pyDumps(arg), 80), err)}
	}
	return v, nil
}

func applyOp(op string, arg any) (any, error) {
	switch op {
	case "$add", "$concat":
		items, err := iterate(arg)
		if err != nil {
			return nil, err
		}
		joined := op == "$concat"
		for _, it := range items {
			if _, ok := it.(string); ok {
				joined = true
			}
		}
		if !joined {
			return pySum(items)
		}
		var b strings.Builder
		for _, it := range items {
			b.WriteString(text(it))
		}
		return b.String(), nil
	case "$sum":
		items, err := iterate(arg)
		if err != nil {
			return nil, err
		}
		return pySum(items)
	case "$sub", "$lt", "$le", "$eq":
		a, err := index(arg, 0)
		if err != nil {
			return nil, err
		}
		b, err := index(arg, 1)
		if err != nil {
			return nil, err
		}
		switch op {
		case "$eq":
			return pyEqual(a, b), nil
		case "$sub":
			na, okA := asNumber(a)
			nb, okB := asNumber(b)
			if !okA || !okB {
				return nil, fmt.Errorf("unsupported operand type(s) for -: '%s' and '%s'", pyTypeName(a), pyTypeName(b))
			}
			return na.sub(nb).value(), nil
		}
		return compare(op, a, b)
	case "$not":
		return !pyTruthy(arg), nil
	case "$len":
		switch x := arg.(type) {
		case []any:
			return int64(len(x)), nil
		case string:
			return int64(len([]rune(x))), nil
		case *OMap:
			return int64(x.Len()), nil
		}
		return nil, fmt.Errorf("object of type '%s' has no len()", pyTypeName(arg))
	}
	return nil, fmt.Errorf("unknown operator %s", op)
}
