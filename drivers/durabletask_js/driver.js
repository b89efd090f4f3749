#!/usr/bin/env node
"use strict";
// Driver for @dapr/durabletask-js 1.0.0 ("jsdapr"): the program language, interpreted with the
// SDK's own API.
//
//   node driver.js --sidecar 127.0.0.1:4001 --canonical programs.canonical.json [--ledger FILE]
//
// Every program of the bundle becomes an orchestrator (`TaskHubGrpcWorker.addNamedOrchestrator`),
// an async generator that walks the steps and yields SDK tasks (`ctx.callActivity`,
// `ctx.callSubOrchestrator`, `ctx.createTimer`, `ctx.waitForExternalEvent`, `whenAll`, `whenAny`)
// and calls `ctx.setCustomStatus` and `ctx.continueAsNew`. The built-in activities are registered
// with `addNamedActivity` and run by activities.js (checked against the golden file). The
// programs come in the canonical form (canonical.js: one shape per step, defaults filled in);
// values.js evaluates its expression nodes (docs/programs.md "Values").
//
// What the SDK cannot express, the driver refuses (exit 3, naming the step path): `if_patched`
// (no isPatched), versioned programs (no version registration), `retry` on a call (no retry
// policies: "Retry policies (TODO)" in the SDK README), and a `wait_event` with a timeout inside
// `all`/`any`. A `wait_event` step with a timeout uses the pattern of the SDK's README ("Human
// interaction and durable timers"): whenAny([event, timer]); the timer is only created when the
// event is not already buffered, and `timeout: 0` creates none.
//
// Timers are created at `ctx.currentUtcDateTime + duration` (a Date). The SDK's other form,
// `createTimer(seconds)`, uses the wall clock (`Date.now()`) and would make replays differ.
//
// DAPR_API_TOKEN: the SDK does not read it; as the Dapr JS SDK's WorkflowRuntime does, the driver
// passes a gRPC client interceptor that adds `dapr-api-token` through the worker's `options`.
//
// Ready signal: the SDK's start() does not wait for the connection; its only signal is its own log
// line "Successfully connected to ...". The driver routes the SDK's console output to stderr,
// waits for that line and then prints `connected to HOST:PORT` on stdout. If the first Hello
// fails, the SDK throws from a promise nobody awaits (it never retries a first connect): exit 4.
// Any later unhandled rejection ends the process with exit 1, as Node's default would.
//
// Exit codes: 0 stopped (SIGTERM/SIGINT), 1 unhandled SDK error, 2 usage or bundle error,
// 3 capability gap, 4 could not connect.

const util = require("util");
const V = require("./values");
const { ProgramError, readPrograms } = require("./canonical");
const { ActivityFailure, ActivityRunner } = require("./activities");

const EXIT_USAGE = 2;
const EXIT_GAP = 3;
const EXIT_CONNECT = 4;
// The release installed beside this file (the pin, or a cached one: conformance run --sdk-version).
const SDK = `@dapr/durabletask-js ${installedVersion()}`;

function installedVersion() {
  try {
    return require("@dapr/durabletask-js/package.json").version;
  } catch (e) {
    return "(not installed)";
  }
}
const BUILTIN_ACTIVITIES = ["echo", "fail", "sleep", "record"];

function die(code, message) {
  process.stderr.write(`js-driver: error: ${message}\n`);
  process.exit(code);
}

// ------------------------------------------------------------------ arguments

function parseArgs(argv) {
  const args = { sidecar: null, canonical: null, ledger: null, readyTimeout: 30 };
  const usage = "usage: driver.js --sidecar HOST:PORT --canonical FILE.json [--ledger FILE] [--ready-timeout S]\n"
    + "       driver.js --probe";
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--probe") {
      process.stdout.write(JSON.stringify(probe()) + "\n");
      process.exit(0);
    }
    const eq = a.indexOf("=");
    const flag = eq > 0 ? a.slice(0, eq) : a;
    const value = () => (eq > 0 ? a.slice(eq + 1) : argv[++i]);
    if (flag === "--sidecar") args.sidecar = value();
    else if (flag === "--canonical") args.canonical = value();
    else if (flag === "--ledger") args.ledger = value();
    else if (flag === "--ready-timeout") args.readyTimeout = Number(value());
    else if (flag === "-h" || flag === "--help") {
      process.stdout.write(usage + "\n");
      process.exit(0);
    } else die(EXIT_USAGE, `unknown argument ${JSON.stringify(a)}\n${usage}`);
  }
  if (!args.sidecar || !args.canonical) die(EXIT_USAGE, `--sidecar and --canonical are required\n${usage}`);
  if (!/^.+:\d+$/.test(args.sidecar)) die(EXIT_USAGE, `--sidecar ${JSON.stringify(args.sidecar)} is not HOST:PORT`);
  if (!(args.readyTimeout > 0)) die(EXIT_USAGE, "--ready-timeout must be a positive number of seconds");
  return args;
}

// ------------------------------------------------------------------ what the installed release lacks

/**
 * `--probe`: {sdk, absent: {capability: reason}} found by asking the installed release's own classes
 * (conformance/targets/probe.py takes the absent ones off the target's declared capabilities). Only
 * capabilities the target declares are asked; patching, versions and retries are refused for every
 * release (capabilityGaps).
 */
function probe() {
  const absent = {};
  let ctx = null;
  try {
    ctx = require("@dapr/durabletask-js/worker/runtime-orchestration-context").RuntimeOrchestrationContext.prototype;
  } catch (e) {
    absent.children = absent.timers = absent.events = absent.carry_events =
      `no worker/runtime-orchestration-context (${e.message})`;
  }
  const has = (name) => ctx !== null && typeof ctx[name] === "function";
  const params = (name) => (has(name) ? (/\(([^)]*)\)/.exec(ctx[name].toString()) || ["", ""])[1].split(",").filter((p) => p.trim()) : []);
  if (ctx !== null) {
    if (!has("callSubOrchestrator")) absent.children = "the orchestration context has no callSubOrchestrator";
    if (!has("createTimer")) absent.timers = "the orchestration context has no createTimer";
    if (!has("waitForExternalEvent")) absent.events = "the orchestration context has no waitForExternalEvent";
    if (params("continueAsNew").length < 2) absent.carry_events = "continueAsNew takes no saveEvents";
  }
  try {
    const { whenAll } = require("@dapr/durabletask-js/task");
    const { CompletableTask } = require("@dapr/durabletask-js/task/completable-task");
    const first = new CompletableTask();
    const both = whenAll([first, new CompletableTask()]);
    first.fail("probe");
    if (!both.isComplete) absent.all_fails_fast = "whenAll waits for every task before it fails";
  } catch (e) {
    absent.all_fails_fast = `whenAll over two fresh tasks could not be asked (${e.message})`;
  }
  try {
    const executor = require("fs").readFileSync(require.resolve("@dapr/durabletask-js/worker/orchestration-executor.js"), "utf8");
    if (!/EXECUTIONSUSPENDED/.test(executor)) absent.suspend = "the orchestration executor handles no ExecutionSuspended";
  } catch (e) {
    absent.suspend = `no worker/orchestration-executor.js (${e.message})`;
  }
  return { sdk: SDK, absent };
}

// ------------------------------------------------------------------ capability check

/** Every step of the programs this driver cannot express with the SDK, as 'path: reason'. */
function capabilityGaps(programs) {
  const gaps = [];
  const walk = (steps, where, inComposite) => {
    steps.forEach((step, i) => {
      const here = `${where}[${i}].${step.step}`;
      if (step.step === "if_patched") {
        gaps.push(`${here}: ${SDK} has no patching API (no isPatched; its proto has no version/patches fields)`);
        return;
      }
      if (step.step === "spawn") {
        gaps.push(`${here}: lacks detached_spawn: this driver maps no ${SDK} call onto a spawn (a detached `
          + "workflow started from workflow code)");
        return;
      }
      if (step.retry) {
        gaps.push(`${here}.retry: ${SDK} has no retry policies (callActivity/callSubOrchestrator take no options; `
          + "the SDK README lists 'Retry policies (TODO)')");
      }
      if (inComposite && step.step === "wait_event" && step.timeout !== null) {
        gaps.push(`${here}: a wait with a timeout inside all/any: waitForExternalEvent has no timeout, the SDK `
          + "has no composite task that fails when a timer wins, and its WhenAnyTask never notifies a parent "
          + "composite, so whenAny([event, timer]) cannot be nested");
      }
      if (step.tasks) walk(step.tasks, here, true);
      if (step.step === "if") {
        walk(step.then, `${here}.then`, false);
        walk(step.else, `${here}.else`, false);
      }
    });
  };
  for (const [name, family] of Object.entries(programs)) {
    if (family.default !== null) {
      gaps.push(`$.programs.${name}.versions: ${SDK} has no versioned registration (its Registry keys orchestrators `
        + "by name only; its proto has no version fields)");
      continue;
    }
    walk(family.versions[0].steps, `$.programs.${name}.steps`, false);
  }
  return gaps;
}

// ------------------------------------------------------------------ the interpreter

const ERROR_CLASSES = new Map();

/** An Error subclass with this exact name: the SDK reports errorType as `e.constructor.name`. */
function errorClass(name) {
  let cls = ERROR_CLASSES.get(name);
  if (!cls) {
    cls = {
      [name]: class extends Error {
        constructor(message) {
          super(message);
          this.name = name;
        }
      },
    }[name];
    ERROR_CLASSES.set(name, cls);
  }
  return cls;
}

/** A canonical expression's value; a language error fails the workflow with errorType ExpressionError. */
function evaluate(node, env) {
  try {
    return V.evaluate(node, env);
  } catch (e) {
    if (e instanceof V.ExpressionError) throw new (errorClass("ExpressionError"))(e.message);
    throw e;
  }
}

/** repr(datetime.timedelta(seconds=s)) for s >= 0, as the reference's TimeoutError message has it. */
function timedeltaRepr(seconds) {
  const us = Math.round(seconds * 1e6);
  const parts = [["days", Math.floor(us / 86400e6)], ["seconds", Math.floor((us % 86400e6) / 1e6)],
    ["microseconds", us % 1e6]].filter(([, n]) => n).map(([k, n]) => `${k}=${n}`);
  return `datetime.timedelta(${parts.length ? parts.join(", ") : "0"})`;
}

/** repr(name) of the event name, as the reference's (dx's) TimeoutError message has it. */
function pyStringRepr(name) {
  return name.includes("'") && !name.includes('"') ? `"${name}"` : `'${name.replace(/\\/g, "\\\\").replace(/'/g, "\\'")}'`;
}

class Returned {
  constructor(value) {
    this.value = value;
  }
}

function timerAt(ctx, seconds) {
  return new Date(ctx.currentUtcDateTime.getTime() + seconds * 1000);
}

function makeTask(sdk, ctx, step, env) {
  switch (step.step) {
    case "call_activity":
      return ctx.callActivity(step.name, evaluate(step.input, env));
    case "call_child": {
      const iid = step.instance_id !== null ? evaluate(step.instance_id, env) : null; // null: the default id
      return ctx.callSubOrchestrator(step.workflow, evaluate(step.input, env),
        iid === null ? undefined : V.text(iid));
    }
    case "timer":
      return ctx.createTimer(timerAt(ctx, step.duration));
    case "wait_event":
      return ctx.waitForExternalEvent(step.name); // a timeout here is refused by capabilityGaps()
    default:
      throw new Error(`${step.step} is not a task`);
  }
}

async function* waitWithTimeout(sdk, ctx, step, env) {
  const event = ctx.waitForExternalEvent(step.name);
  if (event.isComplete) return event.getResult(); // already buffered: no timer, as in the reference
  if (step.timeout > 0) {
    const timer = ctx.createTimer(timerAt(ctx, step.timeout));
    const winner = yield sdk.whenAny([event, timer]);
    if (winner === event) return event.getResult();
  }
  if (step.default !== null) return evaluate(step.default, env);
  throw new (errorClass("TimeoutError"))(
    `Timed out after ${timedeltaRepr(step.timeout)} waiting for external event ${pyStringRepr(step.name)}`);
}

async function* runSteps(sdk, ctx, steps, env) {
  for (const step of steps) {
    switch (step.step) {
      case "wait_event":
      case "call_activity":
      case "call_child":
      case "timer": {
        const value = step.step === "wait_event" && step.timeout !== null
          ? yield* waitWithTimeout(sdk, ctx, step, env)
          : yield makeTask(sdk, ctx, step, env);
        if (step.as) env[step.as] = value === undefined ? null : value;
        break;
      }
      case "all": {
        const value = yield sdk.whenAll(step.tasks.map((t) => makeTask(sdk, ctx, t, env)));
        if (step.as) env[step.as] = value.map((v) => (v === undefined ? null : v));
        break;
      }
      case "any": {
        const children = step.tasks.map((t) => makeTask(sdk, ctx, t, env));
        const winner = yield sdk.whenAny(children);
        if (winner.isFailed) throw winner.getException();
        if (step.as) {
          const result = winner.getResult();
          env[step.as] = { index: children.indexOf(winner), result: result === undefined ? null : result };
        }
        break;
      }
      case "if": {
        const branch = V.truthy(evaluate(step.cond, env)) ? step.then : step.else;
        const out = yield* runSteps(sdk, ctx, branch, env);
        if (out instanceof Returned) return out;
        break;
      }
      case "set":
        env[step.var] = evaluate(step.value, env);
        break;
      case "set_status": {
        const value = evaluate(step.value, env);
        // A string as-is, anything else as JSON; the SDK takes a string and always sends one, so
        // null (the reference clears the status) becomes "".
        ctx.setCustomStatus(value === null ? "" : V.text(value));
        break;
      }
      case "continue_as_new":
        ctx.continueAsNew(evaluate(step.input, env), step.carry_events);
        return new Returned(null);
      case "return":
        return new Returned(evaluate(step.value, env));
      case "fail":
        throw new (errorClass(step.type))(V.text(evaluate(step.message, env)));
      default: // capabilityGaps() refuses these before start; never reached
        throw new Error(`step kind '${step.step}'`);
    }
  }
  return null;
}

function makeOrchestrator(sdk, program) {
  return async function* orchestrator(ctx, input) {
    const env = { input: input === undefined ? null : input, instance_id: ctx.instanceId };
    const out = yield* runSteps(sdk, ctx, program.steps, env);
    return out instanceof Returned ? out.value : null;
  };
}

// ------------------------------------------------------------------ activities

function makeActivity(runner, name) {
  return function activity(ctx, input) {
    const args = { name, input: input === undefined ? null : input, instanceId: ctx.orchestrationId,
      taskId: ctx.taskId, taskExecutionId: "" }; // the SDK's ActivityContext/proto have no taskExecutionId
    const rethrow = (e) => {
      if (e instanceof ActivityFailure) throw new (errorClass(e.errorType))(e.message);
      throw e;
    };
    try {
      const out = runner.run(args);
      return out instanceof Promise ? out.catch(rethrow) : out;
    } catch (e) {
      return rethrow(e);
    }
  };
}

// ------------------------------------------------------------------ main

function apiTokenOptions(grpc) {
  const token = process.env.DAPR_API_TOKEN;
  if (!token) return {};
  const interceptor = (options, nextCall) => new grpc.InterceptingCall(nextCall(options), {
    start(metadata, listener, next) {
      metadata.add("dapr-api-token", token);
      next(metadata, listener);
    },
  });
  return { interceptors: [interceptor] };
}

function main() {
  const args = parseArgs(process.argv.slice(2));
  let programs;
  try {
    programs = readPrograms(args.canonical);
  } catch (e) {
    if (e instanceof ProgramError) die(EXIT_USAGE, e.message);
    throw e;
  }
  const gaps = capabilityGaps(programs);
  if (gaps.length) {
    die(EXIT_GAP, `the programs use steps ${SDK} cannot express (declared capability gap; refusing to start):\n`
      + gaps.map((g) => `  - ${g}`).join("\n"));
  }

  let ready = false;
  let onReady = null;
  // The SDK logs every work item with console.log/info; keep stdout for our own lines.
  for (const level of ["log", "info", "warn", "error", "debug", "trace"]) {
    console[level] = (...parts) => {
      const line = util.format(...parts);
      process.stderr.write(`sdk: ${line}\n`);
      if (!ready && onReady && line.startsWith("Successfully connected to ")) onReady();
    };
  }

  const { TaskHubGrpcWorker } = require("@dapr/durabletask-js");
  const { whenAll, whenAny } = require("@dapr/durabletask-js/task");
  const grpc = require("@grpc/grpc-js");
  const sdk = { whenAll, whenAny };

  const worker = new TaskHubGrpcWorker(args.sidecar, apiTokenOptions(grpc));
  const runner = new ActivityRunner({ ledger: args.ledger });
  const registered = [];
  for (const [name, family] of Object.entries(programs)) {
    worker.addNamedOrchestrator(name, makeOrchestrator(sdk, family.versions[0]));
    registered.push(name);
  }
  for (const name of BUILTIN_ACTIVITIES) worker.addNamedActivity(name, makeActivity(runner, name));
  process.stderr.write(`js-driver: registered ${registered.join(", ")}\n`);

  process.on("unhandledRejection", (err) => {
    if (!ready) die(EXIT_CONNECT, `cannot connect to the sidecar at ${args.sidecar}: ${err && err.message ? err.message : err}`);
    process.stderr.write(`js-driver: error: unhandled error inside the SDK (Node's default would end the process too): `
      + `${err && err.stack ? err.stack : err}\n`);
    process.exit(1);
  });

  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    try {
      if (ready) await worker.stop();
    } catch (e) {
      process.stderr.write(`js-driver: stop: ${e.message}\n`);
    }
    process.stderr.write("js-driver: stopped\n");
    process.exit(0);
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);

  const timeout = setTimeout(() => die(EXIT_CONNECT, `no work-item stream to ${args.sidecar} within ${args.readyTimeout}s`),
    args.readyTimeout * 1000);
  onReady = () => {
    ready = true;
    clearTimeout(timeout);
    process.stdout.write(`connected to ${args.sidecar}\n`);
  };
  worker.start().catch((e) => die(EXIT_CONNECT, `cannot start the worker: ${e.message}`));
}

if (require.main === module) main();

module.exports = { capabilityGaps, errorClass, makeActivity, makeOrchestrator, probe };
