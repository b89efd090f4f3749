"use strict";
// The values of the program language and what expressions do with them (docs/programs.md "Values").
// A value is what JSON.parse gives: null, a boolean, a number, a string, an array or an object.
// Its text is JSON.stringify's, with each object's keys sorted.

/** An operator applied to the wrong kind of value, an unknown variable or a missing key. */
class ExpressionError extends Error {}

const isNumber = (v) => typeof v === "number" || typeof v === "boolean"; // a boolean counts as 1 or 0
const isMapping = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
const own = (v, k) => Object.prototype.hasOwnProperty.call(v, k);
const sorted = (k, v) => (isMapping(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => byCodePoint(a, b))) : v);

/** -1, 0 or 1: two strings by code point (JS's < compares UTF-16 code units). */
function byCodePoint(a, b) {
  const [x, y] = [Array.from(a), Array.from(b)];
  const i = x.findIndex((c, j) => c !== y[j]);
  if (i < 0 || i >= y.length) return Math.sign(x.length - y.length);
  return x[i].codePointAt(0) < y[i].codePointAt(0) ? -1 : 1;
}

/** The text of a value: a string as it is, anything else as JSON (keys sorted, no spaces). */
const json = (v) => JSON.stringify(v ?? null, sorted);
const text = (v) => (typeof v === "string" ? v : json(v));

function typeName(v) {
  if (v === null || v === undefined) return "null";
  return Array.isArray(v) ? "list" : isMapping(v) ? "mapping" : typeof v;
}

function wrong(what, ...values) {
  return new ExpressionError(`${what} is not defined on ${values.map(typeName).join(" and ")}`);
}

function truthy(v) {
  if (v === null || v === undefined) return false;
  if (isNumber(v)) return Number(v) !== 0;
  if (typeof v === "string" || Array.isArray(v)) return v.length > 0;
  return Object.keys(v).length > 0;
}

function equal(a, b) {
  if (isNumber(a) && isNumber(b)) return Number(a) === Number(b);
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => equal(x, b[i]));
  if (isMapping(a) && isMapping(b)) {
    const ka = Object.keys(a);
    return ka.length === Object.keys(b).length && ka.every((k) => own(b, k) && equal(a[k], b[k]));
  }
  return (a ?? null) === (b ?? null);
}

/** -1, 0 or 1: numbers by value, strings by code point, lists item by item; anything else fails. */
function compare(a, b, op) {
  if (isNumber(a) && isNumber(b)) return Math.sign(Number(a) - Number(b));
  if (typeof a === "string" && typeof b === "string") return byCodePoint(a, b);
  if (Array.isArray(a) && Array.isArray(b)) {
    const i = a.findIndex((x, j) => j < b.length && !equal(x, b[j]));
    return i >= 0 ? compare(a[i], b[i], op) : Math.sign(a.length - b.length);
  }
  throw wrong(op, a, b);
}

/** The items an operator that asks for a list sees: a string's characters, a mapping's keys sorted. */
function items(v, op) {
  if (Array.isArray(v)) return v;
  if (typeof v === "string") return Array.from(v);
  if (isMapping(v)) return Object.keys(v).sort(byCodePoint);
  throw wrong(op, v);
}

function nth(v, i, op) {
  const xs = Array.isArray(v) || typeof v === "string" ? items(v, op) : null;
  if (!xs || i >= xs.length) throw new ExpressionError(`${op} needs a list of at least two values, got ${typeName(v)}`);
  return xs[i];
}

function sum(xs, op) {
  return xs.reduce((total, x) => {
    if (!isNumber(x)) throw wrong(op, total, x);
    return total + Number(x);
  }, 0);
}

const OPERATORS = {
  add: (v) => (items(v, "$add").some((x) => typeof x === "string") ? items(v).map(text).join("") : sum(items(v), "$add")),
  sub: (v) => {
    const [a, b] = [nth(v, 0, "$sub"), nth(v, 1, "$sub")];
    if (!isNumber(a) || !isNumber(b)) throw wrong("$sub", a, b);
    return Number(a) - Number(b);
  },
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

function lookup(name, path, env) {
  const written = `\${${[name, ...path].join(".")}}`;
  if (!own(env, name)) {
    throw new ExpressionError(`unknown variable '${name}' in '${written}'; known: ${Object.keys(env).sort().join(", ")}`);
  }
  let v = env[name];
  for (const part of path) {
    const i = /^-?[0-9]+$/.test(part) ? parseInt(part, 10) : NaN;
    if (Array.isArray(v) && -v.length <= i && i < v.length) v = v[i < 0 ? v.length + i : i];
    else if (isMapping(v) && own(v, part)) v = v[part];
    else throw new ExpressionError(`'${written}': '${part}' not found in ${json(v).slice(0, 80)}`);
  }
  return v;
}

/** The value of a canonical expression node on these variables (ExpressionError if it has none). */
function evaluate(node, env) {
  if ("lit" in node) return node.lit;
  if ("int" in node) return node.int;
  if ("float" in node) return node.float;
  if ("list" in node) return node.list.map((n) => evaluate(n, env));
  if ("map" in node) return Object.fromEntries(node.map.map(([k, n]) => [k, evaluate(n, env)]));
  if ("var" in node) return lookup(node.var, node.path, env);
  if ("text" in node) return node.text.map((n) => text(evaluate(n, env))).join("");
  if ("op" in node && own(OPERATORS, node.op)) return OPERATORS[node.op](evaluate(node.arg, env));
  throw new ExpressionError(`not an expression node: ${JSON.stringify(node).slice(0, 80)}`);
}

module.exports = { ExpressionError, equal, evaluate, isMapping, isNumber, json, text, truthy, typeName };
