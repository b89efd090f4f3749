package main

// JSON values with Python's semantics, so that this driver computes and prints values exactly as
// the reference worker (Python) does:
//
//   - numbers keep Python's int/float distinction (`1` vs `1.0`);
//   - mappings keep their key order (Python dicts are ordered);
//   - pyDumps is `json.dumps(value)` with its defaults: separators ", " and ": ", ensure_ascii,
//     floats as `repr(float)`, NaN/Infinity literals;
//   - pyStr is `str(value)` (used where the language turns a value into text with str()).
//
// Values are: nil, bool, int64, float64, string, []any and *OMap. Integers that do not fit in
// int64 are kept as float64 (Python would keep them exact; no scenario needs them).

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// OMap is a JSON object that keeps the order of its keys, like a Python dict.
type OMap struct {
	keys []string
	vals map[string]any
}

func NewOMap() *OMap { return &OMap{vals: map[string]any{}} }

// Set adds or replaces a key; a replaced key keeps its position (as in a Python dict).
func (m *OMap) Set(k string, v any) {
	if _, ok := m.vals[k]; !ok {
		m.keys = append(m.keys, k)
	}
	m.vals[k] = v
}

func (m *OMap) Get(k string) (any, bool) {
	v, ok := m.vals[k]
	return v, ok
}

func (m *OMap) Keys() []string { return m.keys }
func (m *OMap) Len() int       { return len(m.keys) }

// ------------------------------------------------------------------ decoding (json.loads)

// pyLoads decodes JSON text the way Python's json.loads does (ints stay ints, key order kept).
// Empty input decodes to nil (a payload that is absent or "").
func pyLoads(data []byte) (any, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("extra data after the JSON value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			m := NewOMap()
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, ok := kt.(string)
				if !ok {
					return nil, fmt.Errorf("object key %v is not a string", kt)
				}
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				m.Set(k, v)
			}
			if _, err := dec.Token(); err != nil { // '}'
				return nil, err
			}
			return m, nil
		case '[':
			list := []any{}
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				list = append(list, v)
			}
			if _, err := dec.Token(); err != nil { // ']'
				return nil, err
			}
			return list, nil
		}
		return nil, fmt.Errorf("unexpected %v", t)
	case json.Number:
		return parseNumber(string(t))
	case string, bool, nil:
		return t, nil
	}
	return nil, fmt.Errorf("unexpected JSON token %v", tok)
}

func parseNumber(s string) (any, error) {
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i, nil
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) { // Python gives inf for 1e400, too
		return nil, err
	}
	return f, nil
}

// ------------------------------------------------------------------ encoding (json.dumps)

// pyDumps is Python's json.dumps(v) with default arguments.
func pyDumps(v any) string {
	var b strings.Builder
	writeJSON(&b, v)
	return b.String()
}

func writeJSON(b *strings.Builder, v any) {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		if x {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case int:
		b.WriteString(strconv.Itoa(x))
	case int32:
		b.WriteString(strconv.FormatInt(int64(x), 10))
	case float64:
		switch {
		case math.IsNaN(x):
			b.WriteString("NaN")
		case math.IsInf(x, 1):
			b.WriteString("Infinity")
		case math.IsInf(x, -1):
			b.WriteString("-Infinity")
		default:
			b.WriteString(pyFloatRepr(x))
		}
	case string:
		writeJSONString(b, x)
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			writeJSON(b, e)
		}
		b.WriteByte(']')
	case *OMap:
		b.WriteByte('{')
		for i, k := range x.keys {
			if i > 0 {
				b.WriteString(", ")
			}
			writeJSONString(b, k)
			b.WriteString(": ")
			writeJSON(b, x.vals[k])
		}
		b.WriteByte('}')
	default:
		// Not a JSON value of ours (never produced by pyLoads or the evaluator).
		writeJSONString(b, fmt.Sprint(x))
	}
}

// writeJSONString: json.dumps with ensure_ascii=True (anything outside ' '..'~' is escaped).
func writeJSONString(b *strings.Builder, s string) {
	const hexdigits = "0123456789abcdef"
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if r >= 0x20 && r <= 0x7e {
				b.WriteRune(r)
				continue
			}
			write4 := func(u rune) {
				b.WriteString(`\u`)
				b.WriteByte(hexdigits[(u>>12)&0xf])
				b.WriteByte(hexdigits[(u>>8)&0xf])
				b.WriteByte(hexdigits[(u>>4)&0xf])
				b.WriteByte(hexdigits[u&0xf])
			}
			if r > 0xffff {
				r -= 0x10000
				write4(0xd800 | ((r >> 10) & 0x3ff))
				write4(0xdc00 | (r & 0x3ff))
			} else {
				write4(r)
			}
		}
	}
	b.WriteByte('"')
}

// pyFloatRepr is Python's repr(float) for a finite float: the shortest digits that round-trip,
// in fixed notation for 1e-4 <= |x| < 1e16 (with ".0" for whole numbers), else in exponent
// notation with at least two exponent digits ("1e+16", "1.5e-05").
func pyFloatRepr(f float64) string {
	if f == 0 {
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	sign := ""
	if f < 0 {
		sign, f = "-", -f
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	mant, expText, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expText)
	digits := strings.Replace(mant, ".", "", 1)
	decpt := exp + 1 // value = 0.digits * 10^decpt
	if decpt > 16 || decpt < -3 {
		m := digits[:1]
		if len(digits) > 1 {
			m += "." + digits[1:]
		}
		es := "+"
		if exp < 0 {
			es, exp = "-", -exp
		}
		return fmt.Sprintf("%s%se%s%02d", sign, m, es, exp)
	}
	switch {
	case decpt <= 0:
		return sign + "0." + strings.Repeat("0", -decpt) + digits
	case decpt >= len(digits):
		return sign + digits + strings.Repeat("0", decpt-len(digits)) + ".0"
	default:
		return sign + digits[:decpt] + "." + digits[decpt:]
	}
}

// pyJSON is a value the SDK serialises with encoding/json: it marshals as pyDumps does. The SDK
// (task.marshalData -> json.Marshal) compacts a Marshaler's output, so the separators' spaces are
// dropped on the wire, but numbers, key order and escapes stay as Python writes them.
type pyJSON struct{ v any }

func (p pyJSON) MarshalJSON() ([]byte, error) { return []byte(pyDumps(p.v)), nil }

// ------------------------------------------------------------------ str(), repr(), truthiness

// pyStr is Python's str(value).
func pyStr(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return pyRepr(v)
}

// pyRepr is Python's repr(value) for JSON values.
func pyRepr(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case bool:
		if x {
			return "True"
		}
		return "False"
	case int64:
		return strconv.FormatInt(x, 10)
	case int:
		return strconv.Itoa(x)
	case float64:
		switch {
		case math.IsNaN(x):
			return "nan"
		case math.IsInf(x, 1):
			return "inf"
		case math.IsInf(x, -1):
			return "-inf"
		}
		return pyFloatRepr(x)
	case string:
		return pyStrRepr(x)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = pyRepr(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case *OMap:
		parts := make([]string, 0, x.Len())
		for _, k := range x.keys {
			parts = append(parts, pyStrRepr(k)+": "+pyRepr(x.vals[k]))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return fmt.Sprint(v)
}

func pyStrRepr(s string) string {
	quote := '\''
	if strings.ContainsRune(s, '\'') && !strings.ContainsRune(s, '"') {
		quote = '"'
	}
	var b strings.Builder
	b.WriteRune(quote)
	for _, r := range s {
		switch {
		case r == quote || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r < 0x7f:
			b.WriteRune(r)
		case unicode.IsPrint(r) && r != utf8.RuneError:
			b.WriteRune(r)
		case r <= 0xff:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
	}
	b.WriteRune(quote)
	return b.String()
}

// pyTruthy is Python's bool(value).
func pyTruthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case int64:
		return x != 0
	case int:
		return x != 0
	case float64:
		return x != 0
	case string:
		return x != ""
	case []any:
		return len(x) > 0
	case *OMap:
		return x.Len() > 0
	}
	return true
}

// pyEqual is Python's `a == b` for JSON values (1 == 1.0 == True; dicts compare without order).
func pyEqual(a, b any) bool {
	if na, ok := asNumber(a); ok {
		if nb, ok := asNumber(b); ok {
			return na.cmp(nb) == 0
		}
		return false
	}
	switch x := a.(type) {
	case nil:
		return b == nil
	case string:
		y, ok := b.(string)
		return ok && x == y
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !pyEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case *OMap:
		y, ok := b.(*OMap)
		if !ok || x.Len() != y.Len() {
			return false
		}
		for _, k := range x.keys {
			yv, ok := y.vals[k]
			if !ok || !pyEqual(x.vals[k], yv) {
				return false
			}
		}
		return true
	}
	return false
}

// number is a Python int (bool included) or float.
type number struct {
	isFloat bool
	i       int64
	f       float64
}

func asNumber(v any) (number, bool) {
	switch x := v.(type) {
	case bool:
		if x {
			return number{i: 1}, true
		}
		return number{}, true
	case int64:
		return number{i: x}, true
	case int:
		return number{i: int64(x)}, true
	case float64:
		return number{isFloat: true, f: x}, true
	}
	return number{}, false
}

func (n number) float() float64 {
	if n.isFloat {
		return n.f
	}
	return float64(n.i)
}

func (n number) value() any {
	if n.isFloat {
		return n.f
	}
	return n.i
}

func (n number) cmp(o number) int {
	if !n.isFloat && !o.isFloat {
		switch {
		case n.i < o.i:
			return -1
		case n.i > o.i:
			return 1
		}
		return 0
	}
	a, b := n.float(), o.float()
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	case a == b:
		return 0
	}
	return 2 // NaN: unordered
}

func (n number) add(o number) number {
	if !n.isFloat && !o.isFloat {
		s := n.i + o.i
		if (s > n.i) == (o.i > 0) { // no overflow
			return number{i: s}
		}
		return number{isFloat: true, f: float64(n.i) + float64(o.i)}
	}
	return number{isFloat: true, f: n.float() + o.float()}
}

func (n number) sub(o number) number {
	if !n.isFloat && !o.isFloat {
		d := n.i - o.i
		if (d < n.i) == (o.i > 0) { // no overflow
			return number{i: d}
		}
		return number{isFloat: true, f: float64(n.i) - float64(o.i)}
	}
	return number{isFloat: true, f: n.float() - o.float()}
}

// pyTypeName is type(v).__name__ for JSON values (for messages).
func pyTypeName(v any) string {
	switch v.(type) {
	case nil:
		return "NoneType"
	case bool:
		return "bool"
	case int64, int:
		return "int"
	case float64:
		return "float"
	case string:
		return "str"
	case []any:
		return "list"
	case *OMap:
		return "dict"
	}
	return fmt.Sprintf("%T", v)
}
