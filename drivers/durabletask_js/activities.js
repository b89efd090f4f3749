"use strict";
// The built-in activities (echo, fail, sleep, record), ported from fake_worker/activities.py, which
// stays the authority (docs/programs.md "Built-in activities"). Attempts are counted per logical
// call, keyed by (instance id, task execution id), or (instance id, "task-<task id>") when the
// execution id is empty, which it always is here: @dapr/durabletask-js 1.0.0 has no
// taskExecutionId. Ledger lines are written as the text of values.js (Python's json.dumps encoding).

const fs = require("fs");
const V = require("./values");

const LEDGER_ENV = "CONFORMANCE_LEDGER";

/** Python's type name of a JSON value, as int() and float() name it in their errors. */
const pyTypeName = (v) => (v === null ? "NoneType" : typeof v === "boolean" ? "bool" : typeof v === "number"
  ? (Number.isInteger(v) ? "int" : "float") : typeof v === "string" ? "str" : Array.isArray(v) ? "list" : "dict");

class ActivityFailure extends Error {
  constructor(errorType, message) {
    super(message);
    this.errorType = errorType;
  }
}

/** int(v) as Python computes it for a JSON value, or ActivityFailure(ValueError/TypeError). */
function pyInt(v) {
  if (typeof v === "boolean") return v ? 1 : 0;
  if (typeof v === "number") {
    if (!Number.isFinite(v)) throw new ActivityFailure("OverflowError", "cannot convert float infinity to integer");
    return Math.trunc(v);
  }
  if (typeof v === "string" && /^\s*[+-]?\d+(_\d+)*\s*$/.test(v)) return parseInt(v.replace(/_/g, ""), 10);
  if (typeof v === "string") throw new ActivityFailure("ValueError", `invalid literal for int() with base 10: ${V.repr(v)}`);
  throw new ActivityFailure("TypeError",
    `int() argument must be a string, a bytes-like object or a real number, not '${pyTypeName(v)}'`);
}

/** float(v) as Python computes it for a JSON value, or ActivityFailure(ValueError/TypeError). */
function pyFloat(v) {
  if (typeof v === "boolean") return v ? 1 : 0;
  if (typeof v === "number") return v;
  if (typeof v === "string") {
    const t = v.trim().replace(/_/g, "");
    if (/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(t)) return parseFloat(t);
    if (/^[+-]?(inf|infinity)$/i.test(t)) return t.startsWith("-") ? -Infinity : Infinity;
    if (/^[+-]?nan$/i.test(t)) return NaN;
    throw new ActivityFailure("ValueError", `could not convert string to float: ${V.repr(v)}`);
  }
  throw new ActivityFailure("TypeError", `float() argument must be a string or a real number, not '${pyTypeName(v)}'`);
}

class ActivityRunner {
  constructor({ ledger = null } = {}) {
    this.ledger = ledger;
    this.attempts = new Map();
  }

  /** The activity's result, a Promise of it (sleep), or throws ActivityFailure. */
  run({ name, input, instanceId, taskId, taskExecutionId }) {
    const key = JSON.stringify([instanceId, taskExecutionId || `task-${taskId}`, 0]);
    const attempt = (this.attempts.get(key) || 0) + 1;
    this.attempts.set(key, attempt);
    if (name === "echo") return input;
    if (name === "sleep") {
      const seconds = V.truthy(input) ? pyFloat(input) : 0;
      return new Promise((resolve) => setTimeout(() => resolve(input), Math.max(0, seconds) * 1000));
    }
    if (name === "fail") {
      const spec = V.isMapping(input) ? input : { times: pyInt(V.truthy(input) ? input : 0) };
      const hasTimes = Object.prototype.hasOwnProperty.call(spec, "times");
      const times = hasTimes ? spec.times : null; // spec.get("times") -> None when absent
      if (attempt <= pyInt(hasTimes ? times : 0)) {
        const message = Object.prototype.hasOwnProperty.call(spec, "message")
          ? spec.message
          : `planned failure ${attempt} of ${V.display(times)}`;
        throw new ActivityFailure("ActivityFailure", V.display(message));
      }
      return input;
    }
    if (name === "record") {
      const file = this.ledger || process.env[LEDGER_ENV];
      if (!file) throw new ActivityFailure("LedgerMissing", `the record activity needs env ${LEDGER_ENV} to name a file`);
      const line = V.json({
        instance_id: instanceId,
        task_id: taskId,
        task_execution_id: taskExecutionId,
        attempt,
        worker_pid: process.pid,
        time: new V.Float(Date.now() / 1000),
        input,
      });
      fs.appendFileSync(file, line + "\n", "utf-8");
      return input;
    }
    throw new ActivityFailure("ActivityNotRegisteredError", `Activity function named '${name}' was not registered.`);
  }
}

module.exports = { ActivityFailure, ActivityRunner, LEDGER_ENV };
