"use strict";
// The values of the program language and what expressions do with them (docs/programs.md "Values").
//
// A value is null, a boolean, a string, a number, a bigint (an integer beyond 2^53), a Float (a float
// whose value is integral: a JS number cannot tell 2.0 from 2), an array, or a mapping: a Map (from
// the canonical form or decode(), keeping its key order) or a plain object (decoded by the SDK).
// Payloads the SDK decodes itself (JSON.parse) arrive as plain numbers and objects: there an integral
// float reads as an integer and keys that look like array indices come first.

class Float {
  constructor(value) {
    this.value = value;
  }
}

/** An operator applied to the wrong kind of value, an unknown variable or a missing key. */
class ExpressionError extends Error {}

const isFloat = (v) => v instanceof Float || (typeof v === "number" && (!Number.isInteger(v) || Object.is(v, -0)));
const isNumber = (v) => ["boolean", "number", "bigint"].includes(typeof v) || v instanceof Float;
const isMapping = (v) => v instanceof Map
  || (v !== null && typeof v === "object" && !Array.isArray(v) && !(v instanceof Float));
const entries = (v) => (v instanceof Map ? [...v] : Object.entries(v));
const keys = (v) => entries(v).map(([k]) => k);
const hasKey = (v, k) => (v instanceof Map ? v.has(k) : Object.prototype.hasOwnProperty.call(v, k));
const getKey = (v, k) => (v instanceof Map ? v.get(k) : v[k]);
const num = (v) => (typeof v === "boolean" ? Number(v) : v instanceof Float ? v.value : v);
/** A float result: wrapped when integral, so that it keeps printing as a float. */
const float = (x) => (Number.isInteger(x) && !Object.is(x, -0) ? new Float(x) : x);

function typeName(v) {
  if (v === null || v === undefined) return "null";
  if (typeof v === "boolean") return "boolean";
  if (isNumber(v)) return isFloat(v) ? "float" : "integer";
  if (typeof v === "string") return "string";
  return Array.isArray(v) ? "list" : "mapping";
}

function wrong(what, ...values) {
  return new ExpressionError(`${what} is not defined on ${values.map(typeName).join(" and ")}`);
}

/** a + b, or a - b when `minus`; integers stay integers (bigint beyond 2^53), a float makes a float. */
function arith(a, b, minus, op) {
  if (!isNumber(a) || !isNumber(b)) throw wrong(op, a, b);
  if (isFloat(a) || isFloat(b)) return float(minus ? Number(num(a)) - Number(num(b)) : Number(num(a)) + Number(num(b)));
  const r = minus ? BigInt(num(a)) - BigInt(num(b)) : BigInt(num(a)) + BigInt(num(b));
  return Number.isSafeInteger(Number(r)) ? Number(r) : r;
}

function truthy(v) {
  if (v === null || v === undefined) return false;
  if (isNumber(v)) return num(v) != 0; // eslint-disable-line eqeqeq -- 0n and 0 alike
  if (typeof v === "string" || Array.isArray(v)) return v.length > 0;
  return keys(v).length > 0;
}

function equal(a, b) {
  if (isNumber(a) && isNumber(b)) return num(a) == num(b); // eslint-disable-line eqeqeq -- bigint == number by value
  if (a === null || a === undefined || b === null || b === undefined) return (a ?? null) === (b ?? null);
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => equal(x, b[i]));
  if (isMapping(a) && isMapping(b)) {
    const ka = keys(a);
    return ka.length === keys(b).length && ka.every((k) => hasKey(b, k) && equal(getKey(a, k), getKey(b, k)));
  }
  return a === b;
}

/** -1, 0 or 1: numbers by value, strings by code point, lists item by item; anything else fails. */
function compare(a, b, op) {
  if (isNumber(a) && isNumber(b)) return num(a) < num(b) ? -1 : num(a) > num(b) ? 1 : 0;
  if (typeof a === "string" && typeof b === "string") {
    const [x, y] = [Array.from(a), Array.from(b)];
    const i = x.findIndex((c, j) => c !== y[j]);
    if (i < 0 || i >= y.length) return Math.sign(x.length - y.length);
    return x[i].codePointAt(0) < y[i].codePointAt(0) ? -1 : 1;
  }
  if (Array.isArray(a) && Array.isArray(b)) {
    const i = a.findIndex((x, j) => j < b.length && !equal(x, b[j]));
    if (i >= 0) return compare(a[i], b[i], op);
    return Math.sign(a.length - b.length);
  }
  throw wrong(op, a, b);
}

/** The items an operator that asks for a list sees: a string's characters, a mapping's keys. */
function items(v, op) {
  if (Array.isArray(v)) return v;
  if (typeof v === "string") return Array.from(v);
  if (isMapping(v)) return keys(v);
  throw wrong(op, v);
}

function nth(v, i, op) {
  const xs = Array.isArray(v) || typeof v === "string" ? items(v, op) : null;
  if (!xs || i >= xs.length) throw new ExpressionError(`${op} needs a list of at least two values, got ${typeName(v)}`);
  return xs[i];
}

const sum = (xs, op) => xs.reduce((total, x) => arith(total, x, false, op), 0);

const OPERATORS = {
  add: (v) => (items(v, "$add").some((x) => typeof x === "string") ? items(v).map(text).join("") : sum(items(v), "$add")),
  sub: (v) => arith(nth(v, 0, "$sub"), nth(v, 1, "$sub"), true, "$sub"),
  lt: (v) => compare(nth(v, 0, "$lt"), nth(v, 1, "$lt"), "$lt") < 0,
  le: (v) => compare(nth(v, 0, "$le"), nth(v, 1, "$le"), "$le") <= 0,
  eq: (v) => equal(nth(v, 0, "$eq"), nth(v, 1, "$eq")),
  not: (v) => !truthy(v),
  len: (v) => {
    if (typeof v === "string" || Array.isArray(v) || isMapping(v)) return items(v).length;
    throw wrong("$len", v);
  },
  sum: (v) => sum(items(v, "$sum"), "$sum"),
  concat: (v) => items(v, "$concat").map(text).join(""),
};

// ------------------------------------------------------------------ text and display text

function floatText(x, nan = "NaN", inf = "Infinity") {
  if (Number.isNaN(x)) return nan;
  if (!Number.isFinite(x)) return x > 0 ? inf : `-${inf}`;
  if (x === 0) return Object.is(x, -0) ? "-0.0" : "0.0";
  const [mant, expText] = x.toExponential().split("e"); // the shortest digits that read back
  const digits = mant.replace("-", "").replace(".", "");
  const exp = parseInt(expText, 10);
  let out;
  if (exp < -4 || exp >= 16) {
    const e = Math.abs(exp);
    out = `${digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits}e${exp < 0 ? "-" : "+"}${e < 10 ? "0" + e : e}`;
  } else if (exp < 0) out = `0.${"0".repeat(-exp - 1)}${digits}`;
  else if (digits.length <= exp + 1) out = `${digits}${"0".repeat(exp + 1 - digits.length)}.0`;
  else out = `${digits.slice(0, exp + 1)}.${digits.slice(exp + 1)}`;
  return x < 0 ? `-${out}` : out;
}

function numberText(v, nan, inf) {
  if (isFloat(v)) return floatText(num(v), nan, inf);
  const n = num(v);
  return typeof n === "number" && !Number.isSafeInteger(n) ? BigInt(n).toString() : String(n);
}

const ESCAPES = { '"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f" };

function jsonString(s) {
  return `"${s.replace(/[^\x20-\x7e]|["\\]/g, (c) => ESCAPES[c] ?? `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`)}"`;
}

/** The text of a value: a string as it is, anything else as JSON text (", " and ": ", ASCII only). */
function text(v) {
  return typeof v === "string" ? v : json(v);
}

function json(v) {
  if (v === null || v === undefined || typeof v === "boolean") return String(v ?? null);
  if (isNumber(v)) return numberText(v);
  if (typeof v === "string") return jsonString(v);
  if (Array.isArray(v)) return `[${v.map(json).join(", ")}]`;
  return `{${entries(v).map(([k, x]) => `${jsonString(k)}: ${json(x)}`).join(", ")}}`;
}

const NOT_PRINTABLE = /[\p{C}\p{Z}]/u;

function quoted(s) {
  const q = s.includes("'") && !s.includes('"') ? '"' : "'";
  let out = q;
  for (const c of s) {
    const code = c.codePointAt(0);
    if (c === q || c === "\\") out += `\\${c}`;
    else if (c === "\n" || c === "\r" || c === "\t") out += ESCAPES[c];
    else if (c !== " " && NOT_PRINTABLE.test(c)) {
      const [tag, width] = code < 0x100 ? ["x", 2] : code < 0x10000 ? ["u", 4] : ["U", 8];
      out += `\\${tag}${code.toString(16).padStart(width, "0")}`;
    } else out += c;
  }
  return out + q;
}

function repr(v) {
  if (v === null || v === undefined) return "None";
  if (typeof v === "boolean") return v ? "True" : "False";
  if (isNumber(v)) return numberText(v, "nan", "inf");
  if (typeof v === "string") return quoted(v);
  if (Array.isArray(v)) return `[${v.map(repr).join(", ")}]`;
  return `{${entries(v).map(([k, x]) => `${quoted(k)}: ${repr(x)}`).join(", ")}}`;
}

/** The display text of a value (a `fail` message, a child instance id). */
function display(v) {
  return typeof v === "string" ? v : repr(v);
}

// ------------------------------------------------------------------ evaluation

function lookup(name, path, env) {
  const written = `\${${[name, ...path].join(".")}}`;
  if (!Object.prototype.hasOwnProperty.call(env, name)) {
    throw new ExpressionError(`unknown variable '${name}' in '${written}'; known: ${Object.keys(env).sort().join(", ")}`);
  }
  let v = env[name];
  for (const part of path) {
    const i = /^-?[0-9]+$/.test(part) ? parseInt(part, 10) : NaN;
    if (Array.isArray(v) && -v.length <= i && i < v.length) v = v[i < 0 ? v.length + i : i];
    else if (isMapping(v) && hasKey(v, part)) v = getKey(v, part);
    else throw new ExpressionError(`'${written}': '${part}' not found in ${json(v).slice(0, 80)}`);
  }
  return v;
}

/** The value of a canonical expression node on these variables (ExpressionError if it has none). */
function evaluate(node, env) {
  if ("lit" in node) return node.lit;
  if ("int" in node) return node.int;
  if ("float" in node) return float(num(node.float));
  if ("list" in node) return node.list.map((n) => evaluate(n, env));
  if ("map" in node) return new Map(node.map.map(([k, n]) => [k, evaluate(n, env)]));
  if ("var" in node) return lookup(node.var, node.path, env);
  if ("text" in node) return node.text.map((n) => text(evaluate(n, env))).join("");
  if ("op" in node && Object.prototype.hasOwnProperty.call(OPERATORS, node.op)) return OPERATORS[node.op](evaluate(node.arg, env));
  throw new ExpressionError(`not an expression node: ${JSON.stringify(node).slice(0, 80)}`);
}

/** A value as the SDK sends it (JSON.stringify): plain objects and numbers. */
function plain(v) {
  if (v instanceof Float) return v.value;
  if (typeof v === "bigint") return Number(v);
  if (Array.isArray(v)) return v.map(plain);
  if (isMapping(v)) return Object.fromEntries(entries(v).map(([k, x]) => [k, plain(x)]));
  return v ?? null;
}

// ------------------------------------------------------------------ JSON text with integers and floats apart

/** JSON text with integers beyond 2^53 as bigint. With `{values: true}` as values of the language:
 * integral floats (`2.0`) as Float, objects as Maps in document order; else plain numbers and objects
 * (the canonical form, whose float nodes are tagged). */
function decode(source, { values = false } = {}) {
  const NUMBER = /-?(?:0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/y;
  const fixed = { true: true, false: false, null: null };
  let at = 0;
  const fail = (what) => {
    throw new SyntaxError(`${what} at offset ${at}`);
  };
  const space = () => {
    while (/\s/.test(source[at] ?? "")) at++;
  };
  const value = () => {
    space();
    const c = source[at];
    if (c === "{" || c === "[") {
      at++;
      const pairs = [];
      for (space(); source[at] !== (c === "{" ? "}" : "]"); space()) {
        if (pairs.length) (source[at] === "," ? at++ : fail("',' expected"));
        if (c === "[") pairs.push(value());
        else {
          space();
          const k = source[at] === '"' ? value() : fail("a key expected");
          space();
          (source[at] === ":" ? at++ : fail("':' expected"));
          pairs.push([k, value()]);
        }
      }
      at++;
      return c === "[" ? pairs : values ? new Map(pairs) : Object.fromEntries(pairs);
    }
    if (c === '"') {
      const end = /"(?:[^"\\\x00-\x1f]|\\.)*"/y;
      end.lastIndex = at;
      const m = end.exec(source) || fail("an unterminated string");
      at = end.lastIndex;
      return JSON.parse(m[0]);
    }
    for (const [word, v] of Object.entries(fixed)) if (source.startsWith(word, at)) return (at += word.length, v);
    NUMBER.lastIndex = at;
    const m = NUMBER.exec(source) || fail("a value expected");
    at = NUMBER.lastIndex;
    if (m[1] || m[2]) return values ? float(Number(m[0])) : Number(m[0]);
    return Number.isSafeInteger(Number(m[0])) ? Number(m[0]) + 0 : BigInt(m[0]); // + 0: "-0" is the integer 0
  };
  const out = value();
  space();
  if (at !== source.length) fail("text after the value");
  return out;
}

module.exports = {
  ExpressionError, Float, decode, display, equal, evaluate, isMapping, json, plain, repr, text, truthy, typeName,
};
