// The order application of dx_orders.py on @dapr/durabletask-js 1.0.0, for `conformance replay`.
// Public API only (TaskHubGrpcWorker.addNamedOrchestrator/addNamedActivity, TaskHubGrpcClient).
// The SDK is the one installed for the driver (drivers/durabletask_js/node_modules, on NODE_PATH).
//
//   node js_orders.js serve  --address HOST:PORT --version v1|v2|renamed
//   node js_orders.js record --address HOST:PORT --version v1
//
// Versions of `order`: v1 reserve, wait for "approve", charge; v2 an `audit` activity after
// reserve; renamed: v1 registered as "order_v2" only. The SDK has no patching API (no isPatched),
// so there is no v2-patched here.
"use strict";

const util = require("util");

// The SDK logs every work item on stdout; keep stdout for the one result line.
for (const level of ["log", "info", "warn", "error", "debug", "trace"]) {
  console[level] = (...parts) => process.stderr.write(`sdk: ${util.format(...parts)}\n`);
}

const { TaskHubGrpcWorker, TaskHubGrpcClient } = require("@dapr/durabletask-js");

const reserve = async (ctx, item) => `reserved:${item}`;
const audit = async (ctx, what) => `audited:${what}`;
const charge = async (ctx, what) => `charged:${what}`;

async function* orderV1(ctx, item) {
  const r = yield ctx.callActivity("reserve", item);
  ctx.setCustomStatus("waiting");
  yield ctx.waitForExternalEvent("approve");
  const c = yield ctx.callActivity("charge", r);
  return { reserved: r, charged: c };
}

async function* orderV2(ctx, item) {
  const r = yield ctx.callActivity("reserve", item);
  yield ctx.callActivity("audit", r);
  ctx.setCustomStatus("waiting");
  yield ctx.waitForExternalEvent("approve");
  const c = yield ctx.callActivity("charge", r);
  return { reserved: r, charged: c };
}

const ORDERS = { v1: ["order", orderV1], v2: ["order", orderV2], renamed: ["order_v2", orderV1] };

function parse(argv) {
  const args = { mode: argv[0], version: "v1" };
  for (let i = 1; i < argv.length; i += 2) args[argv[i].replace(/^--/, "")] = argv[i + 1];
  if (!["serve", "record"].includes(args.mode) || !args.address || !ORDERS[args.version]) {
    process.stderr.write("usage: js_orders.js serve|record --address HOST:PORT [--version v1|v2|renamed]\n");
    process.exit(2);
  }
  return args;
}

function worker(args) {
  const w = new TaskHubGrpcWorker(args.address);
  const [name, fn] = ORDERS[args.version];
  w.addNamedOrchestrator(name, fn);
  w.addNamedActivity("reserve", reserve);
  w.addNamedActivity("audit", audit);
  w.addNamedActivity("charge", charge);
  return w;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitFor(pred, timeoutMs = 60000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await pred()) return true;
    await sleep(50);
  }
  return false;
}

async function record(args) {
  const w = worker(args);
  await w.start();
  const client = new TaskHubGrpcClient(args.address);
  const done = "order-done-0", waiting = "order-waiting-0";
  for (const iid of [done, waiting]) await client.scheduleNewOrchestration("order", "item-0", iid);
  for (const iid of [done, waiting]) {
    const ok = await waitFor(async () => {
      const s = await client.getOrchestrationState(iid, true);
      return s !== undefined && ["waiting", '"waiting"'].includes(s.serializedCustomStatus);
    });
    if (!ok) throw new Error(`${iid} never reached its wait`);
  }
  await client.raiseOrchestrationEvent(done, "approve", true);
  const state = await client.waitForOrchestrationCompletion(done, true, 60);
  if (!state || state.runtimeStatus !== 1) throw new Error(`${done} did not complete: ${JSON.stringify(state)}`);
  process.stdout.write(JSON.stringify({ completed: [done], running: [waiting] }) + "\n");
  await w.stop();
  await client.stop();
  process.exit(0);
}

async function serve(args) {
  const w = worker(args);
  const stop = async () => {
    try { await w.stop(); } finally { process.exit(0); }
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
  await w.start();
}

const args = parse(process.argv.slice(2));
(args.mode === "record" ? record(args) : serve(args)).catch((e) => {
  process.stderr.write(`js_orders: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});
