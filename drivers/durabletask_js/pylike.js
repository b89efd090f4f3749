"use strict";
// Python value semantics for the program language, so that this driver computes exactly what
// taskhub_programs and fake_worker/activities.py compute in Python:
//   - pyDumps: json.dumps(value) with its defaults (separators ", " and ": ", ensure_ascii=True,
//     float repr, Infinity/NaN), as the reference uses for spliced text, set_status and the ledger;
//   - pyStr / pyRepr: str() and repr() of JSON values (messages of `fail`, error texts);
//   - pyTruthy, pyEq, pyCompare: Python truthiness, ==, and < / <= on JSON values;
//   - PyTypeError / pyTypeName: Python's TypeError for operators applied to the wrong kind of value.
//
// Known limits (JSON.parse cannot keep them; the SDK parses every payload with it):
//   - a float with an integral value (1.0) is indistinguishable from an int and prints as 1;
//   - object keys that look like array indices ("1", "2") come first in JS objects, whatever the
//     order in the JSON text; Python keeps the document order.

/** A number that must print as a Python float even when it is integral (the ledger's time). */
class PyFloat {
  constructor(value) {
    this.value = value;
  }
  toJSON() {
    return this.value;
  }
}

class PyTypeError extends Error {}

function isNumeric(v) {
  return typeof v === "number" || typeof v === "boolean" || v instanceof PyFloat;
}

function num(v) {
  if (v instanceof PyFloat) return v.value;
  if (typeof v === "boolean") return v ? 1 : 0;
  return v;
}

function pyTypeName(v) {
  if (v === null || v === undefined) return "NoneType";
  if (typeof v === "boolean") return "bool";
  if (v instanceof PyFloat) return "float";
  if (typeof v === "number") return Number.isInteger(v) ? "int" : "float";
  if (typeof v === "string") return "str";
  if (Array.isArray(v)) return "list";
  return "dict";
}

function isMapping(v) {
  return v !== null && typeof v === "object" && !Array.isArray(v) && !(v instanceof PyFloat);
}

/** repr() of a Python float, from the shortest round-trip digits (Python's 'r' format). */
function floatRepr(x) {
  if (Number.isNaN(x)) return "nan";
  if (x === Infinity) return "inf";
  if (x === -Infinity) return "-inf";
  if (x === 0) return Object.is(x, -0) ? "-0.0" : "0.0";
  const [mant, expText] = x.toExponential().split("e"); // shortest digits, e.g. "-1.5e+16"
  const neg = mant.startsWith("-");
  const digits = mant.replace("-", "").replace(".", "");
  const exp = parseInt(expText, 10);
  let out;
  if (exp < -4 || exp >= 16) {
    const m = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
    const e = Math.abs(exp);
    out = `${m}e${exp < 0 ? "-" : "+"}${e < 10 ? "0" + e : e}`;
  } else if (exp < 0) {
    out = `0.${"0".repeat(-exp - 1)}${digits}`;
  } else if (digits.length <= exp + 1) {
    out = `${digits}${"0".repeat(exp + 1 - digits.length)}.0`;
  } else {
    out = `${digits.slice(0, exp + 1)}.${digits.slice(exp + 1)}`;
  }
  return neg ? `-${out}` : out;
}

/** str()/repr() of a JS number as Python shows the value json.loads would have produced. */
function numberRepr(x) {
  if (Number.isInteger(x) && !Object.is(x, -0)) {
    return Math.abs(x) < 1e16 ? String(x) : BigInt(x).toString();
  }
  return floatRepr(x);
}

function jsonString(s) {
  let out = '"';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    const ch = s[i];
    if (ch === '"') out += '\\"';
    else if (ch === "\\") out += "\\\\";
    else if (ch === "\n") out += "\\n";
    else if (ch === "\r") out += "\\r";
    else if (ch === "\t") out += "\\t";
    else if (ch === "\b") out += "\\b";
    else if (ch === "\f") out += "\\f";
    else if (c < 0x20 || c > 0x7e) out += "\\u" + c.toString(16).padStart(4, "0");
    else out += ch;
  }
  return out + '"';
}

/** json.dumps(value) with Python's defaults. */
function pyDumps(v) {
  if (v === null || v === undefined) return "null";
  if (v === true) return "true";
  if (v === false) return "false";
  if (v instanceof PyFloat) {
    const x = v.value;
    if (Number.isNaN(x)) return "NaN";
    if (!Number.isFinite(x)) return x > 0 ? "Infinity" : "-Infinity";
    return floatRepr(x);
  }
  if (typeof v === "number") {
    if (Number.isNaN(v)) return "NaN";
    if (!Number.isFinite(v)) return v > 0 ? "Infinity" : "-Infinity";
    return numberRepr(v);
  }
  if (typeof v === "string") return jsonString(v);
  if (Array.isArray(v)) return "[" + v.map(pyDumps).join(", ") + "]";
  return "{" + Object.keys(v).map((k) => `${jsonString(k)}: ${pyDumps(v[k])}`).join(", ") + "}";
}

function strRepr(s) {
  const quote = s.includes("'") && !s.includes('"') ? '"' : "'";
  let out = quote;
  for (const ch of s) {
    const c = ch.codePointAt(0);
    if (ch === "\\") out += "\\\\";
    else if (ch === quote) out += "\\" + quote;
    else if (ch === "\n") out += "\\n";
    else if (ch === "\r") out += "\\r";
    else if (ch === "\t") out += "\\t";
    else if (c < 0x20 || c === 0x7f) out += "\\x" + c.toString(16).padStart(2, "0");
    else out += ch;
  }
  return out + quote;
}

/** repr() of a JSON value as Python shows it. */
function pyRepr(v) {
  if (v === null || v === undefined) return "None";
  if (v === true) return "True";
  if (v === false) return "False";
  if (v instanceof PyFloat) return floatRepr(v.value);
  if (typeof v === "number") return numberRepr(v);
  if (typeof v === "string") return strRepr(v);
  if (Array.isArray(v)) return "[" + v.map(pyRepr).join(", ") + "]";
  return "{" + Object.keys(v).map((k) => `${strRepr(k)}: ${pyRepr(v[k])}`).join(", ") + "}";
}

/** str() of a JSON value. */
function pyStr(v) {
  return typeof v === "string" ? v : pyRepr(v);
}

function pyTruthy(v) {
  if (v === null || v === undefined) return false;
  if (typeof v === "boolean") return v;
  if (v instanceof PyFloat) return v.value !== 0;
  if (typeof v === "number") return v !== 0;
  if (typeof v === "string") return v.length > 0;
  if (Array.isArray(v)) return v.length > 0;
  return Object.keys(v).length > 0;
}

function pyEq(a, b) {
  if (isNumeric(a) && isNumeric(b)) return num(a) === num(b);
  if (a === null || a === undefined || b === null || b === undefined) {
    return (a === null || a === undefined) && (b === null || b === undefined);
  }
  if (typeof a === "string" || typeof b === "string") return a === b;
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => pyEq(x, b[i]));
  }
  if (isMapping(a) && isMapping(b)) {
    const ka = Object.keys(a);
    const kb = Object.keys(b);
    return ka.length === kb.length && ka.every((k) => Object.prototype.hasOwnProperty.call(b, k) && pyEq(a[k], b[k]));
  }
  return false;
}

function codePointCompare(a, b) {
  const x = Array.from(a);
  const y = Array.from(b);
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    const d = x[i].codePointAt(0) - y[i].codePointAt(0);
    if (d !== 0) return d < 0 ? -1 : 1;
  }
  return x.length === y.length ? 0 : x.length < y.length ? -1 : 1;
}

/** -1, 0 or 1 as Python orders a and b; PyTypeError where Python raises TypeError for `op`. */
function pyCompare(a, b, op) {
  if (isNumeric(a) && isNumeric(b)) {
    const x = num(a);
    const y = num(b);
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (typeof a === "string" && typeof b === "string") return codePointCompare(a, b);
  if (Array.isArray(a) && Array.isArray(b)) {
    for (let i = 0; i < Math.min(a.length, b.length); i++) {
      if (!pyEq(a[i], b[i])) return pyCompare(a[i], b[i], op);
    }
    return a.length === b.length ? 0 : a.length < b.length ? -1 : 1;
  }
  throw new PyTypeError(`'${op}' not supported between instances of '${pyTypeName(a)}' and '${pyTypeName(b)}'`);
}

/** iter(v) as a list, or PyTypeError (strings iterate by code point, dicts by key). */
function pyIter(v) {
  if (Array.isArray(v)) return v;
  if (typeof v === "string") return Array.from(v);
  if (isMapping(v)) return Object.keys(v);
  throw new PyTypeError(`'${pyTypeName(v)}' object is not iterable`);
}

/** sum(items) with Python's start value 0. */
function pySum(items) {
  let total = 0;
  for (const item of items) {
    if (!isNumeric(item)) {
      throw new PyTypeError(`unsupported operand type(s) for +: 'int' and '${pyTypeName(item)}'`);
    }
    total += num(item);
  }
  return total;
}

/** v[i] for an int index i, as Python raises it (IndexError/KeyError/TypeError all become errors). */
function pySubscript(v, i) {
  if (Array.isArray(v) || typeof v === "string") {
    const items = Array.isArray(v) ? v : Array.from(v);
    if (i >= items.length) {
      throw new PyTypeError(`${Array.isArray(v) ? "list" : "string"} index out of range`);
    }
    return items[i];
  }
  if (isMapping(v)) throw new PyTypeError(String(i));
  throw new PyTypeError(`'${pyTypeName(v)}' object is not subscriptable`);
}

function pyLen(v) {
  if (typeof v === "string") return Array.from(v).length;
  if (Array.isArray(v)) return v.length;
  if (isMapping(v)) return Object.keys(v).length;
  throw new PyTypeError(`object of type '${pyTypeName(v)}' has no len()`);
}

/** repr(datetime.timedelta(seconds=s)) for s >= 0. */
function timedeltaRepr(seconds) {
  const totalUs = Math.round(seconds * 1e6);
  const days = Math.floor(totalUs / 86400e6);
  const rest = totalUs - days * 86400e6;
  const secs = Math.floor(rest / 1e6);
  const us = rest - secs * 1e6;
  const parts = [];
  if (days) parts.push(`days=${days}`);
  if (secs) parts.push(`seconds=${secs}`);
  if (us) parts.push(`microseconds=${us}`);
  return `datetime.timedelta(${parts.length ? parts.join(", ") : "0"})`;
}

module.exports = {
  PyFloat,
  PyTypeError,
  isMapping,
  isNumeric,
  num,
  pyCompare,
  pyDumps,
  pyEq,
  pyIter,
  pyLen,
  pyRepr,
  pyStr,
  pySubscript,
  pySum,
  pyTruthy,
  pyTypeName,
  timedeltaRepr,
};
