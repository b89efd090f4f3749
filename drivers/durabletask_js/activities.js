"use strict";
// The built-in activities (docs/programs.md "Built-in activities"; test/golden.js checks `builtin`
// against the golden file's cases). Attempts are counted per logical call, keyed by (instance id,
// task execution id), or (instance id, "task-<task id>") when the execution id is empty, which it
// always is here: @dapr/durabletask-js 1.0.0 has no taskExecutionId.

const fs = require("fs");
const V = require("./values");

const LEDGER_ENV = "CONFORMANCE_LEDGER";

class ActivityFailure extends Error {
  constructor(errorType, message) {
    super(message);
    this.errorType = errorType;
  }
}

/** [result, seconds to sleep first] of the attempt-th execution of one call; throws ActivityFailure. */
function builtin(name, input, attempt) {
  if (name === "echo" || name === "record") return [input, 0];
  if (name === "propagated") return [null, 0]; // no history propagation in this SDK
  if (name === "sleep") {
    if (input === null || typeof input === "number") return [input, Math.max(0, input ?? 0)];
    throw new ActivityFailure("ActivityInputError", `sleep takes a number of seconds or null, got ${V.text(input)}`);
  }
  if (name === "fail") {
    const spec = V.isMapping(input) ? input : { times: input };
    const times = spec.times ?? 0;
    if (typeof times !== "number") {
      throw new ActivityFailure("ActivityInputError", `fail takes a number or {times, message}, got ${V.text(input)}`);
    }
    if (attempt <= times) {
      const message = "message" in spec ? V.text(spec.message) : `planned failure ${attempt} of ${V.text(times)}`;
      throw new ActivityFailure("ActivityFailure", message);
    }
    return [input, 0];
  }
  throw new ActivityFailure("ActivityNotRegisteredError", `Activity function named '${name}' was not registered.`);
}

class ActivityRunner {
  constructor({ ledger = null } = {}) {
    this.ledger = ledger;
    this.attempts = new Map();
  }

  /** The activity's result, a Promise of it (sleep), or throws ActivityFailure. */
  run({ name, input, instanceId, taskId, taskExecutionId }) {
    const key = JSON.stringify([instanceId, taskExecutionId || `task-${taskId}`]);
    const attempt = (this.attempts.get(key) || 0) + 1;
    this.attempts.set(key, attempt);
    const [result, seconds] = builtin(name, input, attempt);
    if (name === "record") {
      const file = this.ledger || process.env[LEDGER_ENV];
      if (!file) throw new ActivityFailure("LedgerMissing", `the record activity needs env ${LEDGER_ENV} to name a file`);
      const line = { instance_id: instanceId, task_id: taskId, task_execution_id: taskExecutionId, attempt,
        worker_pid: process.pid, time: Date.now() / 1000, input };
      fs.appendFileSync(file, JSON.stringify(line) + "\n", "utf-8");
    }
    if (seconds > 0) return new Promise((resolve) => setTimeout(() => resolve(result), seconds * 1000));
    return result;
  }
}

module.exports = { ActivityFailure, ActivityRunner, LEDGER_ENV, builtin };
