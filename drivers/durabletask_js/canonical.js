"use strict";
// The canonical program form (docs/programs.md "The canonical form"), the file the harness writes as
// {canonical}: one shape per step, every default filled in, durations in seconds, expressions as
// canonical nodes (values.js evaluates them). The driver parses no shorthand and fills in no default.

const fs = require("fs");

const FORMAT = "taskhub-programs/canonical";
const VERSION = 1;

class ProgramError extends Error {}

/** The programs ({name: {default, versions: [{name, steps}]}}) of a decoded canonical document. */
function programsOf(doc, source) {
  if (doc === null || typeof doc !== "object" || doc.format !== FORMAT || doc.version !== VERSION
      || doc.programs === null || typeof doc.programs !== "object") {
    throw new ProgramError(`${source} is not the canonical program form (format ${FORMAT}, version ${VERSION}): `
      + "pass the file the harness writes as {canonical} (taskhub_programs.canonical_form), not the bundle");
  }
  return doc.programs;
}

function readPrograms(file) {
  let text;
  try {
    text = fs.readFileSync(file, "utf-8");
  } catch (e) {
    throw new ProgramError(`cannot read the canonical programs: ${e.message}`);
  }
  try {
    return programsOf(JSON.parse(text), file);
  } catch (e) {
    if (e instanceof SyntaxError) throw new ProgramError(`${file} is not JSON: ${e.message}`);
    throw e;
  }
}

module.exports = { ProgramError, programsOf, readPrograms };
