"use strict";
// The driver against the cross-language golden file (tests/programs/golden/programs.json): every
// expression's canonical node, evaluated in the file's `env`, gives the recorded value, text and
// truthiness, or an ExpressionError; every built-in activity case gives the recorded outcome on
// each execution; and the driver reads the file's canonical programs. Prints one line per
// mismatch; exit 1 if any.
//
//   node drivers/durabletask_js/test/golden.js tests/programs/golden/programs.json

const fs = require("fs");
const V = require("../values");
const { ActivityFailure, builtin } = require("../activities");
const { capabilityGaps } = require("../driver");
const { programsOf } = require("../canonical");

const doc = JSON.parse(fs.readFileSync(process.argv[2], "utf-8"));
const problems = [];
doc.expressions.forEach((want, i) => {
  const where = `expressions[${i}] ${JSON.stringify(want.expr)}`;
  let got;
  try {
    got = V.evaluate(want.canonical, doc.env);
  } catch (e) {
    if (!(e instanceof V.ExpressionError)) throw e;
    if (!("error" in want)) problems.push(`${where}: ExpressionError (${e.message}), expected ${V.json(want.value)}`);
    return;
  }
  if ("error" in want) {
    problems.push(`${where}: ${V.json(got)}, expected an ExpressionError`);
    return;
  }
  if (!V.equal(got, want.value)) problems.push(`${where}: value ${V.json(got)} != ${V.json(want.value)}`);
  if (V.text(got) !== want.text) problems.push(`${where}: text ${JSON.stringify(V.text(got))}, expected ${JSON.stringify(want.text)}`);
  if (V.truthy(got) !== want.truthy) problems.push(`${where}: truthy ${V.truthy(got)}, expected ${want.truthy}`);
});
for (const c of doc.activities) {
  c.executions.forEach((want, i) => {
    const where = `activities ${c.activity}(${V.json(c.input)}) execution ${i + 1}`;
    let got;
    try {
      const [result, sleep] = builtin(c.activity, c.input, i + 1);
      got = { result, sleep };
    } catch (e) {
      if (!(e instanceof ActivityFailure)) throw e;
      got = { error_type: e.errorType, error_message: e.message };
    }
    if (V.json(got) !== V.json(want)) problems.push(`${where}: ${V.json(got)}, expected ${V.json(want)}`);
  });
}
const gaps = capabilityGaps(programsOf(doc.canonical, "the golden file")).map((g) => g.split(":")[0]).join("\n");
for (const path of ["$.programs.every_step.steps[1].call_activity.retry", "$.programs.every_step.steps[11].if_patched",
  "$.programs.versioned.versions", "$.programs.spawner.steps[0].spawn"]) {
  if (!gaps.includes(path)) problems.push(`capability gaps of the golden programs do not name ${path}:\n${gaps}`);
}
for (const p of problems) process.stdout.write(p + "\n");
process.stdout.write(`${doc.expressions.length} expressions, ${doc.activities.length} activity cases, `
  + `${problems.length} mismatch(es)\n`);
process.exit(problems.length ? 1 : 0);
