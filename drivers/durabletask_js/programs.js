"use strict";
// The workflow program language (docs/programs.md) in JS: the bundle loader and the expression
// evaluator, ported from taskhub_programs, which stays the authority. The loader accepts
// the same documents and reports every problem at once with its path; expressions evaluate with
// Python semantics (pylike.js), so spliced text, comparisons and errors match the reference.

const fs = require("fs");
const path = require("path");
const py = require("./pylike");

const OPERATORS = ["$add", "$sub", "$lt", "$le", "$eq", "$not", "$len", "$sum", "$concat"];
const BUILTIN_ACTIVITIES = ["echo", "fail", "sleep", "record"];
const TASK_KINDS = ["call_activity", "call_child", "timer", "wait_event"];
const STEP_KINDS = TASK_KINDS.concat(["all", "any", "if_patched", "if", "set", "set_status", "continue_as_new",
  "return", "fail"]);
const VAR = /^[A-Za-z_][A-Za-z0-9_]*$/;
const DURATION = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/;
const UNITS = { ms: 0.001, s: 1, m: 60, h: 3600, d: 86400, undefined: 1 };
const NO_DEFAULT = Symbol("no default");

class ProgramError extends Error {
  constructor(problems, source) {
    const where = source ? ` in ${source}` : "";
    super(`${problems.length} problem(s)${where}:\n` + problems.map((p) => `  - ${p}`).join("\n"));
    this.problems = problems;
  }
}

class ExpressionError extends Error {}

const has = (o, k) => Object.prototype.hasOwnProperty.call(o, k);
const sortedKeys = (o) => Object.keys(o).map(String).sort();

function parseDuration(value) {
  if (typeof value === "boolean") throw new Error(`${py.pyRepr(value)} is not a duration`);
  if (typeof value === "number") {
    if (value < 0) throw new Error(`duration ${py.pyRepr(value)} is negative`);
    return value;
  }
  if (typeof value === "string") {
    const m = DURATION.exec(value);
    if (m) return parseFloat(m[1]) * UNITS[m[2]];
  }
  throw new Error(`${py.pyRepr(value)} is not a duration (use seconds or a string like '500ms', '2s', '1m', '1h', '1d')`);
}

class Parser {
  constructor() {
    this.problems = [];
  }

  err(p, msg) {
    this.problems.push(`${p}: ${msg}`);
  }

  bundle(doc) {
    if (!py.isMapping(doc) || !has(doc, "programs")) {
      this.err("$", "a program bundle is a mapping with a 'programs' key");
      return { programs: {} };
    }
    const extra = Object.keys(doc).filter((k) => k !== "programs" && k !== "$schema");
    if (extra.length) this.err("$", `unknown keys ${py.pyRepr(extra.sort())}; allowed: programs`);
    const progs = doc.programs;
    if (!py.isMapping(progs) || !Object.keys(progs).length) {
      this.err("$.programs", "must be a non-empty mapping of workflow name to program");
      return { programs: {} };
    }
    const out = {};
    for (const [name, body] of Object.entries(progs)) {
      const fam = this.family(name, body, `$.programs.${name}`);
      if (fam) out[name] = fam;
    }
    return { programs: out };
  }

  family(name, body, p) {
    if (!py.isMapping(body)) {
      this.err(p, "must be a mapping with 'steps' or 'versions'");
      return null;
    }
    if (has(body, "versions")) {
      const extra = Object.keys(body).filter((k) => k !== "versions" && k !== "default");
      if (extra.length) {
        this.err(p, `unknown keys ${py.pyRepr(extra.sort())}; a versioned program has 'versions' and 'default'`);
      }
      const versions = body.versions;
      if (!py.isMapping(versions) || !Object.keys(versions).length) {
        this.err(`${p}.versions`, "must be a non-empty mapping of version name to {steps: [...]}");
        return null;
      }
      let dflt = has(body, "default") ? body.default : null;
      if (dflt === null) {
        dflt = sortedKeys(versions).slice(-1)[0];
      } else if (!Object.keys(versions).includes(py.pyStr(dflt))) {
        this.err(`${p}.default`, `names version ${py.pyRepr(dflt)}, which is not one of ${py.pyRepr(sortedKeys(versions))}`);
      }
      const progs = {};
      for (const [vname, vbody] of Object.entries(versions)) {
        const vpath = `${p}.versions.${vname}`;
        if (!py.isMapping(vbody) || Object.keys(vbody).length !== 1 || !has(vbody, "steps")) {
          this.err(vpath, "must be a mapping with exactly one key, 'steps'");
          continue;
        }
        progs[vname] = { name, version: vname, steps: this.steps(vbody.steps, `${vpath}.steps`) };
      }
      return { name, versions: progs, default: py.pyStr(dflt) };
    }
    const keys = Object.keys(body);
    if (keys.length !== 1 || keys[0] !== "steps") {
      this.err(p, `unknown keys ${py.pyRepr(keys.filter((k) => k !== "steps").sort())}; a program has 'steps' (or 'versions')`);
    }
    return { name, versions: { "": { name, version: null, steps: this.steps(body.steps, `${p}.steps`) } }, default: null };
  }

  steps(raw, p) {
    if (raw === null || raw === undefined) return [];
    if (!Array.isArray(raw)) {
      this.err(p, "must be a list of steps");
      return [];
    }
    const out = [];
    raw.forEach((item, i) => {
      const step = this.step(item, `${p}[${i}]`);
      if (step) out.push(step);
    });
    return out;
  }

  kindOf(item, p, allowed) {
    if (!py.isMapping(item)) {
      this.err(p, `a step is a mapping with one of ${py.pyRepr(allowed)}`);
      return null;
    }
    const keys = Object.keys(item).filter((k) => k !== "as");
    if (keys.length !== 1 || !allowed.includes(keys[0])) {
      this.err(p, `a step has exactly one of ${py.pyRepr(allowed)} (plus optional 'as'); got ${py.pyRepr(sortedKeys(item))}`);
      return null;
    }
    let as = has(item, "as") ? item.as : null;
    if (as !== null && (typeof as !== "string" || !VAR.test(as))) {
      this.err(`${p}.as`, `${py.pyRepr(as)} is not a variable name (letters, digits, '_')`);
      as = null;
    }
    return [keys[0], item[keys[0]], as];
  }

  step(item, p0) {
    const parsed = this.kindOf(item, p0, STEP_KINDS);
    if (!parsed) return null;
    const [kind, body0, as] = parsed;
    let body = body0;
    const p = `${p0}.${kind}`;
    if (TASK_KINDS.includes(kind)) return this.task(kind, body, p, as);
    if (as !== null && kind !== "all" && kind !== "any") this.err(`${p0}.as`, `'${kind}' produces no value to store`);
    if (kind === "all" || kind === "any") {
      if (!Array.isArray(body) || !body.length) {
        this.err(p, "must be a non-empty list of tasks (call_activity, call_child, timer, wait_event)");
        return null;
      }
      const tasks = [];
      body.forEach((t, i) => {
        const tp = this.kindOf(t, `${p}[${i}]`, TASK_KINDS);
        if (!tp) return;
        if (tp[2] !== null) this.err(`${p}[${i}].as`, "tasks inside all/any have no 'as'; name the all/any step instead");
        const task = this.task(tp[0], tp[1], `${p}[${i}].${tp[0]}`, null);
        if (task) tasks.push(task);
      });
      return { kind, tasks, as };
    }
    if (kind === "if_patched") {
      body = this.mapping(body, p, ["patch"], ["then", "else"]);
      if (!body) return null;
      return { kind, patch: py.pyStr(body.patch), then: this.steps(body.then, `${p}.then`), else: this.steps(body.else, `${p}.else`) };
    }
    if (kind === "if") {
      body = this.mapping(body, p, ["cond"], ["then", "else"]);
      if (!body) return null;
      this.expr(body.cond, `${p}.cond`);
      return { kind, cond: body.cond, then: this.steps(body.then, `${p}.then`), else: this.steps(body.else, `${p}.else`) };
    }
    if (kind === "set") {
      body = this.mapping(body, p, ["var", "value"]);
      if (!body) return null;
      if (typeof body.var !== "string" || !VAR.test(body.var)) this.err(`${p}.var`, `${py.pyRepr(body.var)} is not a variable name`);
      this.expr(body.value, `${p}.value`);
      return { kind, var: py.pyStr(body.var), value: body.value };
    }
    if (kind === "set_status") {
      this.expr(body, p);
      return { kind, value: body };
    }
    if (kind === "continue_as_new") {
      body = this.mapping(body === null || body === undefined ? {} : body, p, [], ["input", "carry_events"]);
      if (!body) return null;
      const carry = has(body, "carry_events") ? body.carry_events : false;
      if (typeof carry !== "boolean") this.err(`${p}.carry_events`, "must be true or false");
      this.expr(body.input, `${p}.input`);
      return { kind, input: has(body, "input") ? body.input : null, carry_events: py.pyTruthy(carry) };
    }
    if (kind === "return") {
      this.expr(body, p);
      return { kind, value: body === undefined ? null : body };
    }
    if (kind === "fail") {
      if (typeof body === "string") return { kind, message: body, type: "ProgramFailure" };
      body = this.mapping(body, p, ["message"], ["type"]);
      if (!body) return null;
      this.expr(body.message, `${p}.message`);
      return { kind, message: body.message, type: has(body, "type") ? py.pyStr(body.type) : "ProgramFailure" };
    }
    throw new Error(kind);
  }

  task(kind, body0, p, as) {
    let body = body0;
    if (kind === "call_activity") {
      body = this.mapping(body, p, ["name"], ["input", "retry"]);
      if (!body) return null;
      this.expr(body.input, `${p}.input`);
      return { kind, name: py.pyStr(body.name), input: has(body, "input") ? body.input : null,
        retry: this.retry(body.retry, `${p}.retry`), as };
    }
    if (kind === "call_child") {
      body = this.mapping(body, p, ["workflow"], ["input", "instance_id", "retry"]);
      if (!body) return null;
      this.expr(body.input, `${p}.input`);
      this.expr(body.instance_id, `${p}.instance_id`);
      return { kind, workflow: py.pyStr(body.workflow), input: has(body, "input") ? body.input : null,
        instance_id: has(body, "instance_id") ? body.instance_id : null, retry: this.retry(body.retry, `${p}.retry`), as };
    }
    if (kind === "timer") {
      if (!py.isMapping(body)) body = { duration: body };
      body = this.mapping(body, p, ["duration"]);
      if (!body) return null;
      return { kind, duration: this.duration(body.duration, `${p}.duration`), as };
    }
    if (kind === "wait_event") {
      if (typeof body === "string") body = { name: body };
      body = this.mapping(body, p, ["name"], ["timeout", "default"]);
      if (!body) return null;
      const timeout = has(body, "timeout") ? body.timeout : null;
      this.expr(body.default, `${p}.default`);
      return { kind, name: py.pyStr(body.name),
        timeout: timeout === null ? null : this.duration(timeout, `${p}.timeout`),
        default: has(body, "default") ? body.default : NO_DEFAULT, as };
    }
    throw new Error(kind);
  }

  retry(raw, p) {
    if (raw === null || raw === undefined) return null;
    const body = this.mapping(raw, p, ["max_attempts", "first_delay"], ["backoff", "max_delay"]);
    if (!body) return null;
    let attempts = body.max_attempts;
    if (typeof attempts !== "number" || !Number.isInteger(attempts) || attempts < 1) {
      this.err(`${p}.max_attempts`, `${py.pyRepr(attempts)} must be a whole number >= 1`);
      attempts = 1;
    }
    let backoff = has(body, "backoff") ? body.backoff : 1.0;
    if (typeof backoff !== "number" || backoff < 1) {
      this.err(`${p}.backoff`, `${py.pyRepr(backoff)} must be a number >= 1`);
      backoff = 1.0;
    }
    const maxDelay = has(body, "max_delay") ? body.max_delay : null;
    return { max_attempts: attempts, first_delay: this.duration(body.first_delay, `${p}.first_delay`), backoff,
      max_delay: maxDelay === null ? null : this.duration(maxDelay, `${p}.max_delay`) };
  }

  duration(raw, p) {
    try {
      return parseDuration(raw);
    } catch (e) {
      this.err(p, e.message);
      return 0;
    }
  }

  mapping(raw, p, required = [], optional = []) {
    if (!py.isMapping(raw)) {
      this.err(p, `must be a mapping with keys ${py.pyRepr(required.concat(optional))}`);
      return null;
    }
    const missing = required.filter((k) => !has(raw, k));
    if (missing.length) {
      this.err(p, `missing required key(s) ${py.pyRepr(missing)}`);
      return null;
    }
    const extra = Object.keys(raw).filter((k) => !required.includes(k) && !optional.includes(k));
    if (extra.length) {
      this.err(p, `unknown key(s) ${py.pyRepr(extra.sort())}; allowed: ${py.pyRepr(required.concat(optional))}`);
    }
    return raw;
  }

  expr(raw, p) {
    if (py.isMapping(raw)) {
      const ops = Object.keys(raw).filter((k) => k.startsWith("$"));
      if (ops.length) {
        if (Object.keys(raw).length !== 1 || !OPERATORS.includes(ops[0])) {
          this.err(p, `an operator is a mapping with one key from ${py.pyRepr(OPERATORS)}; got ${py.pyRepr(sortedKeys(raw))}`);
          return;
        }
        this.expr(raw[ops[0]], `${p}.${ops[0]}`);
        return;
      }
      for (const [k, v] of Object.entries(raw)) this.expr(v, `${p}.${k}`);
    } else if (Array.isArray(raw)) {
      raw.forEach((v, i) => this.expr(v, `${p}[${i}]`));
    }
  }
}

function parseBundle(doc, source = "") {
  const parser = new Parser();
  const bundle = parser.bundle(doc);
  if (parser.problems.length) throw new ProgramError(parser.problems, source);
  return bundle;
}

function loadBundle(file) {
  let text;
  try {
    text = fs.readFileSync(file, "utf-8");
  } catch (e) {
    throw new ProgramError([`cannot read the program bundle: ${e.message}`], file);
  }
  if (path.extname(file) !== ".json") {
    throw new ProgramError(["this driver reads JSON bundles only (the harness writes .json); convert the YAML first"], file);
  }
  let doc;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    throw new ProgramError([`not valid JSON: ${e.message}`], file);
  }
  return parseBundle(doc, file);
}

// ---------------------------------------------------------------------------- expressions

const REF = /\$\{([^}]+)\}/g;
const REF_FULL = /^\$\{([^}]+)\}$/;

function text(value) {
  return typeof value === "string" ? value : py.pyDumps(value);
}

function lookup(ref, env) {
  const [head, ...rest] = ref.trim().split(".");
  if (!has(env, head)) {
    throw new ExpressionError(`unknown variable '${head}' in '\${${ref}}'; known: ${py.pyRepr(Object.keys(env).sort())}`);
  }
  let value = env[head];
  for (const part of rest) {
    if (Array.isArray(value) && /^-?[0-9]+$/.test(part) && -value.length <= parseInt(part, 10)
        && parseInt(part, 10) < value.length) {
      const i = parseInt(part, 10);
      value = value[i < 0 ? value.length + i : i];
    } else if (py.isMapping(value) && has(value, part)) {
      value = value[part];
    } else {
      throw new ExpressionError(`'\${${ref}}': ${py.pyRepr(part)} not found in ${py.pyDumps(value).slice(0, 80)}`);
    }
  }
  return value;
}

/** Substitute `${var}` references and apply `$` operators; pure. */
function evaluate(expr, env) {
  if (typeof expr === "string") {
    if (!expr.includes("${")) return expr;
    const m = REF_FULL.exec(expr);
    // Python's fullmatch of \$\{([^}]+)\}: the whole string is one reference.
    if (m) return lookup(m[1], env);
    return expr.replace(REF, (_, ref) => text(lookup(ref, env)));
  }
  if (expr === null || expr === undefined || typeof expr !== "object") return expr === undefined ? null : expr;
  if (Array.isArray(expr)) return expr.map((v) => evaluate(v, env));
  const keys = Object.keys(expr);
  if (keys.length === 1 && OPERATORS.includes(keys[0])) return apply(keys[0], evaluate(expr[keys[0]], env));
  const out = {};
  for (const k of keys) out[k] = evaluate(expr[k], env);
  return out;
}

function apply(op, arg) {
  try {
    switch (op) {
      case "$add": {
        const items = py.pyIter(arg);
        return items.some((a) => typeof a === "string") ? items.map(text).join("") : py.pySum(items);
      }
      case "$sub": {
        const a = py.pySubscript(arg, 0);
        const b = py.pySubscript(arg, 1);
        if (!py.isNumeric(a) || !py.isNumeric(b)) {
          throw new py.PyTypeError(`unsupported operand type(s) for -: '${py.pyTypeName(a)}' and '${py.pyTypeName(b)}'`);
        }
        return py.num(a) - py.num(b);
      }
      case "$lt":
        return py.pyCompare(py.pySubscript(arg, 0), py.pySubscript(arg, 1), "<") < 0;
      case "$le":
        return py.pyCompare(py.pySubscript(arg, 0), py.pySubscript(arg, 1), "<=") <= 0;
      case "$eq":
        return py.pyEq(py.pySubscript(arg, 0), py.pySubscript(arg, 1));
      case "$not":
        return !py.pyTruthy(arg);
      case "$len":
        return py.pyLen(arg);
      case "$sum":
        return py.pySum(py.pyIter(arg));
      case "$concat":
        return py.pyIter(arg).map(text).join("");
      default:
        break;
    }
  } catch (e) {
    if (e instanceof py.PyTypeError) {
      throw new ExpressionError(`${op} cannot be applied to ${py.pyDumps(arg).slice(0, 80)}: ${e.message}`);
    }
    throw e;
  }
  throw new ExpressionError(`unknown operator ${op}`);
}

module.exports = {
  BUILTIN_ACTIVITIES,
  ExpressionError,
  NO_DEFAULT,
  ProgramError,
  evaluate,
  loadBundle,
  parseBundle,
  parseDuration,
  text,
};
