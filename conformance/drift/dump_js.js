// Dump the protobuf message schema of @dapr/durabletask-js in a node process.
//
// Usage: node dump_js.js <node_modules dir>
// The package's generated *_pb.js (google-protobuf) keeps no descriptors, so the schema is read
// from the .proto the package ships (proto/orchestrator_service.proto), parsed with the protobufjs
// copy in the same node_modules. Output format matches dump_python.py:
//   {"<message full name>": {"<number>": [name, type, label]}}
"use strict";
const path = require("path");
const nm = path.resolve(process.argv[2] || "node_modules");
const protobuf = require(path.join(nm, "protobufjs"));
const protoFile = path.join(nm, "@dapr/durabletask-js/proto/orchestrator_service.proto");

const root = new protobuf.Root();
// google/protobuf/*.proto: protobufjs bundles the well-known types as "common" definitions.
root.resolvePath = (origin, target) => {
  if (target.startsWith("google/protobuf/")) return target; // served by protobuf.common
  return protobuf.util.path.resolve(origin, target);
};
root.loadSync(protoFile, { keepCase: true, alternateCommentMode: false });
root.resolveAll();

function fullName(t) { return t.fullName.replace(/^\./, ""); }
function typeName(f) {
  if (f.resolvedType) return fullName(f.resolvedType);
  return f.type;
}
const out = {};
function walk(ns, fileOfInterest) {
  for (const obj of ns.nestedArray) {
    if (obj instanceof protobuf.Type) {
      if (!fullName(obj).startsWith("google.protobuf")) {
        const fields = {};
        for (const f of obj.fieldsArray.slice().sort((a, b) => a.id - b.id)) {
          let type, label = "";
          if (f.map) {
            type = `map<${f.keyType},${typeName(f)}>`;
          } else {
            type = typeName(f);
            if (f.repeated) label = "repeated";
          }
          if (!f.repeated && !f.map && f.partOf) {
            const o = f.partOf;
            // proto3 `optional`: synthetic oneof "_<field>" with one member
            if (o.name === "_" + f.name && o.fieldsArray.length === 1) label = "optional";
            else label = "oneof:" + o.name;
          } else if (f.required) {
            label = "required";
          }
          fields[String(f.id)] = [f.name, type, label];
        }
        out[fullName(obj)] = fields;
      }
      walk(obj);
    } else if (obj instanceof protobuf.Namespace && !(obj instanceof protobuf.Service) &&
               !(obj instanceof protobuf.Enum)) {
      walk(obj);
    }
  }
}
walk(root);
const sorted = {};
for (const k of Object.keys(out).sort()) sorted[k] = out[k];
process.stdout.write(JSON.stringify(sorted, null, 1) + "\n");
