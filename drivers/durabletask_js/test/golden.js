"use strict";
// The driver's expression semantics against the cross-language golden file
// (tests/programs/golden/programs.json): every expression's canonical node, evaluated in the file's
// `env`, gives the recorded value, text, truthiness and display text, or an ExpressionError; and the
// driver reads the file's canonical programs. Prints one line per mismatch; exit 1 if any.
//
//   node drivers/durabletask_js/test/golden.js tests/programs/golden/programs.json

const fs = require("fs");
const V = require("../values");
const { capabilityGaps } = require("../driver");
const { programsOf } = require("../canonical");

const source = fs.readFileSync(process.argv[2], "utf-8");
const nodes = V.decode(source); // plain objects: canonical nodes as the driver reads them
const typed = V.decode(source, { values: true }); // Maps: env and values in document order
const env = Object.fromEntries(typed.get("env"));
const problems = [];
nodes.expressions.forEach((c, i) => {
  const want = typed.get("expressions")[i];
  const where = `expressions[${i}] ${V.json(typed.get("expressions")[i].get("expr"))}`;
  let got;
  try {
    got = V.evaluate(c.canonical, env);
  } catch (e) {
    if (!(e instanceof V.ExpressionError)) throw e;
    if (!want.has("error")) problems.push(`${where}: ExpressionError (${e.message}), expected ${V.json(want.get("value"))}`);
    return;
  }
  if (want.has("error")) {
    problems.push(`${where}: ${V.json(got)}, expected an ExpressionError`);
    return;
  }
  const outcome = { value: V.json(got), text: V.text(got), truthy: V.truthy(got), display: V.display(got) };
  const expected = { value: V.json(want.get("value")), text: want.get("text"), truthy: want.get("truthy"),
    display: want.get("display") };
  if (!V.equal(got, want.get("value"))) problems.push(`${where}: value ${outcome.value} != ${expected.value}`);
  for (const k of Object.keys(outcome)) {
    if (outcome[k] !== expected[k]) problems.push(`${where}: ${k} ${JSON.stringify(outcome[k])}, expected ${JSON.stringify(expected[k])}`);
  }
});
const programs = programsOf(nodes.canonical, "the golden file");
const gaps = capabilityGaps(programs).map((g) => g.split(":")[0]).join("\n");
for (const path of ["$.programs.every_step.steps[1].call_activity.retry", "$.programs.every_step.steps[11].if_patched",
  "$.programs.versioned.versions"]) {
  if (!gaps.includes(path)) problems.push(`capability gaps of the golden programs do not name ${path}:\n${gaps}`);
}
for (const p of problems) process.stdout.write(p + "\n");
process.stdout.write(`${nodes.expressions.length} expressions, ${problems.length} mismatch(es)\n`);
process.exit(problems.length ? 1 : 0);
