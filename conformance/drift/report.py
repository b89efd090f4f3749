"""Schema drift report: our Dapr wire schema compared with each SDK's own protobuf schema.

Our side is ``taskhub_wire.pb.DESCRIPTOR`` (package ``taskhub.dapr.v1``), dumped in this process.
Each SDK's side is dumped in the SDK's own process (its virtualenv's python, node, go, java) by the
dumpers next to this file, all printing ``{message: {number: [name, type, label]}}``.

Messages are paired by name: exact name first, else the SDK name after the rename map
(SubOrchestration -> ChildWorkflow, Orchestrator/Orchestration -> Workflow), which covers
OrchestratorRequest/Response/Action, OrchestrationInstance/State/Version,
CreateSubOrchestrationAction, SubOrchestrationInstance*Event, Orchestrator{Started,Completed}Event,
CompleteOrchestrationAction, ... while names that exist unchanged on our side
(OrchestrationStatus, OrchestrationIdReusePolicy) stay as they are. Message-typed field types are
compared after the same mapping, with our package stripped.

Per paired message: renamed (same number and type, different name), added (in the SDK only),
missing (ours only), type conflicts (same number, different type or repeated-ness) and label
differences (same type, different presence/oneof membership: wire-compatible).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
OUR_PACKAGE = "taskhub.dapr.v1"

RENAMES = (("SubOrchestration", "ChildWorkflow"), ("Orchestrator", "Workflow"), ("Orchestration", "Workflow"))


@dataclass
class Sdk:
    key: str
    title: str
    kind: str  # python | js | go | java
    install: str
    location: Path
    target: str = ""  # python: module/package to walk; js: node_modules dir

    def installed(self) -> bool:
        if self.kind == "python":
            return (self.location / "bin" / "python").exists()
        if self.kind == "js":
            return (self.location / "@dapr" / "durabletask-js" / "proto").is_dir() and shutil.which("node") is not None
        if self.kind == "go":
            return shutil.which("go") is not None and (REPO / ".tools" / "go" / "pkg" / "mod").is_dir()
        if self.kind == "java":
            return any(self.location.glob("durabletask-client-*.jar")) and shutil.which("javac") is not None
        return False


def default_sdks(repo: Path = REPO) -> list[Sdk]:
    return [
        Sdk("dx", "dapr-ext-workflow (Python, .sdk/dx)", "python", "scripts/install-sdks.sh",
            repo / ".sdk" / "dx", "dapr.ext.workflow._durabletask.internal"),
        Sdk("dd", "durabletask-dapr (Python, .sdk/dd)", "python", "scripts/install-sdks.sh",
            repo / ".sdk" / "dd", "durabletask.internal.orchestrator_service_pb2"),
        Sdk("js", "@dapr/durabletask-js (node, proto shipped in the package)", "js", "scripts/install-js.sh",
            repo / "drivers" / "durabletask_js" / "node_modules"),
        Sdk("go", "dapr/durabletask-go api/protos (Go, version pinned in conformance/drift/go/go.mod)", "go",
            "scripts/install-go-driver.sh (fills the project-local Go module cache)", repo / "conformance" / "drift" / "go"),
        Sdk("java", "durabletask Java SDK (.tools/java-driver/lib)", "java", "scripts/install-java-driver.sh",
            repo / ".tools" / "java-driver" / "lib"),
    ]


# ----------------------------------------------------------------------------------------------
# Dumps


def _load_dumper():
    spec = importlib.util.spec_from_file_location("_drift_dump_python", HERE / "dump_python.py")
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


def dump_ours() -> tuple[dict, dict[str, list[int]]]:
    """Our schema (in this process) and the reserved field numbers per message (short names)."""
    from google.protobuf import descriptor_pb2

    from taskhub_wire import pb

    schema = _load_dumper().dump_files([pb.DESCRIPTOR])
    fdp = descriptor_pb2.FileDescriptorProto()
    pb.DESCRIPTOR.CopyToProto(fdp)
    reserved: dict[str, list[int]] = {}

    def walk(msgs, prefix):
        for m in msgs:
            name = prefix + m.name
            nums = [n for r in m.reserved_range for n in range(r.start, r.end)]
            if nums:
                reserved[name] = nums
            walk(m.nested_type, name + ".")

    walk(fdp.message_type, "")
    return schema, reserved


def _run(cmd: list[str], cwd: Path | None = None, env: dict | None = None, timeout: float = 300) -> dict:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
    return json.loads(proc.stdout)


def _go_env() -> dict:
    tools = REPO / ".tools"
    env = dict(os.environ)
    env.update(GOTOOLCHAIN="local", GOPATH=str(tools / "go"), GOMODCACHE=str(tools / "go" / "pkg" / "mod"),
               GOCACHE=str(tools / "go-build"), CGO_ENABLED="0", GOFLAGS="-mod=readonly -modcacherw -trimpath")
    return env


def dump_sdk(sdk: Sdk) -> dict:
    if sdk.kind == "python":
        return _run([str(sdk.location / "bin" / "python"), str(HERE / "dump_python.py"), sdk.target])
    if sdk.kind == "js":
        return _run(["node", str(HERE / "dump_js.js"), str(sdk.location)])
    if sdk.kind == "go":
        return _run(["go", "run", "."], cwd=HERE / "go", env=_go_env(), timeout=600)
    if sdk.kind == "java":
        jars = os.pathsep.join(str(p) for p in sorted(sdk.location.glob("*.jar")))
        with tempfile.TemporaryDirectory(prefix="drift-java-") as out:
            proc = subprocess.run(["javac", "-nowarn", "-d", out, "-cp", jars, str(HERE / "java" / "DriftDump.java")],
                                  capture_output=True, text=True, timeout=300)
            if proc.returncode != 0:
                raise RuntimeError(f"javac failed: {proc.stderr.strip()[-2000:]}")
            return _run(["java", "-cp", out + os.pathsep + jars, "DriftDump"])
    raise ValueError(sdk.kind)


# ----------------------------------------------------------------------------------------------
# Comparison


def strip_ours(name: str) -> str:
    return name[len(OUR_PACKAGE) + 1:] if name.startswith(OUR_PACKAGE + ".") else name


def canonical(name: str, our_names: set[str]) -> str:
    """Map an SDK message/type name to our (unpackaged) name when the rename map finds one."""
    if name in our_names:
        return name
    renamed = name
    for old, new in RENAMES:
        renamed = renamed.replace(old, new)
    return renamed if renamed in our_names else name


def _norm_type(t: str, resolve) -> str:
    if t.startswith("map<") and t.endswith(">"):
        k, v = t[4:-1].split(",", 1)
        return f"map<{resolve(k)},{resolve(v)}>"
    return resolve(t)


def compare(ours_raw: dict, sdk: dict, reserved: dict[str, list[int]] | None = None) -> dict:
    reserved = reserved or {}
    ours = {strip_ours(k): v for k, v in ours_raw.items()}
    our_names = set(ours)
    our_type = lambda t: strip_ours(t)  # noqa: E731
    sdk_type = lambda t: canonical(t, our_names)  # noqa: E731
    pairs: dict[str, str] = {}
    only_sdk = []
    for name in sorted(sdk):
        c = canonical(name, our_names)
        if c in ours and c not in pairs:
            pairs[c] = name
        else:
            only_sdk.append(name)
    only_ours = sorted(n for n in ours if n not in pairs)
    paired = {}
    identical = []
    for our_name in sorted(pairs):
        sdk_name = pairs[our_name]
        a, b = ours[our_name], sdk[sdk_name]
        res = {"sdk_name": sdk_name, "renamed": [], "added": [], "missing": [], "type_conflicts": [],
               "label_differences": []}
        res_nums = set(reserved.get(our_name, []))
        for num in sorted(set(a) | set(b), key=int):
            n = int(num)
            if num not in b:
                name, typ, label = a[num]
                res["missing"].append({"number": n, "name": name, "type": our_type(typ), "label": label})
                continue
            if num not in a:
                name, typ, label = b[num]
                res["added"].append({"number": n, "name": name, "type": sdk_type(typ), "label": label,
                                     "reserved_in_ours": n in res_nums})
                continue
            (an, at, al), (bn, bt, bl) = a[num], b[num]
            at_n, bt_n = _norm_type(at, our_type), _norm_type(bt, sdk_type)
            type_conflict = at_n != bt_n or (al == "repeated") != (bl == "repeated")
            if type_conflict:
                res["type_conflicts"].append({"number": n, "ours": [an, at_n, al], "sdk": [bn, bt_n, bl]})
            elif an != bn:
                res["renamed"].append({"number": n, "ours": an, "sdk": bn, "type": at_n})
            if not type_conflict and al != bl:
                res["label_differences"].append({"number": n, "name": an, "ours": al, "sdk": bl})
        if any(res[k] for k in ("renamed", "added", "missing", "type_conflicts", "label_differences")):
            paired[our_name] = res
        else:
            identical.append(our_name if sdk_name == our_name else f"{our_name} = {sdk_name}")
    summary = {
        "messages_ours": len(ours), "messages_sdk": len(sdk), "paired": len(pairs),
        "only_in_ours": len(only_ours), "only_in_sdk": len(only_sdk), "identical": len(identical),
        "renamed_messages": sum(1 for k, v in pairs.items() if k != v),
    }
    for k in ("renamed", "added", "missing", "type_conflicts", "label_differences"):
        summary[k] = sum(len(r[k]) for r in paired.values())
    return {"summary": summary, "only_in_ours": only_ours, "only_in_sdk": only_sdk,
            "renamed_messages": {k: v for k, v in sorted(pairs.items()) if k != v},
            "paired": paired, "identical": identical}


def run(sdks: list[Sdk] | None = None, only: set[str] | None = None) -> dict:
    ours, reserved = dump_ours()
    result = {"ours": {"proto": "taskhub_wire/dapr/taskhub.proto", "package": OUR_PACKAGE, "messages": len(ours)},
              "sdks": {}}
    for sdk in sdks or default_sdks():
        if only and sdk.key not in only:
            continue
        entry: dict = {"title": sdk.title}
        if not sdk.installed():
            entry.update(status="not installed", install=sdk.install)
        else:
            try:
                entry.update(status="ok", **compare(ours, dump_sdk(sdk), reserved))
            except Exception as exc:  # noqa: BLE001 - reported, not fatal for the other SDKs
                entry.update(status="error", error=str(exc))
        result["sdks"][sdk.key] = entry
    return result


# ----------------------------------------------------------------------------------------------
# Markdown


def _f(x) -> str:
    name, typ, label = x
    return f"`{name}: {(label + ' ') if label else ''}{typ}`"


def render_markdown(result: dict) -> str:
    out = ["# Schema drift: our Dapr wire schema vs the SDKs' own descriptors", "",
           f"Ours: `{result['ours']['proto']}` (package `{result['ours']['package']}`, "
           f"{result['ours']['messages']} messages). Each SDK's schema was dumped in the SDK's own process. "
           "Messages paired by name after the rename map (SubOrchestration→ChildWorkflow, "
           "Orchestrator/Orchestration→Workflow). *added* = in the SDK only, *missing* = ours only, "
           "*type conflict* = same number, different type or repeated-ness (wire-incompatible), "
           "*label difference* = same type, different presence/oneof (wire-compatible).", "",
           "| SDK | status | paired | only ours | only SDK | renamed fields | added | missing | type conflicts | label diffs |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for key, e in result["sdks"].items():
        if e["status"] != "ok":
            detail = f"not installed: `{e['install']}`" if e["status"] == "not installed" else f"error: {e['error'][:200]}"
            out.append(f"| {key} | {detail} | | | | | | | | |")
            continue
        s = e["summary"]
        out.append(f"| {key} | ok | {s['paired']} | {s['only_in_ours']} | {s['only_in_sdk']} | {s['renamed']} | "
                   f"{s['added']} | {s['missing']} | {s['type_conflicts']} | {s['label_differences']} |")
    for key, e in result["sdks"].items():
        out += ["", f"## {key}: {e['title']}", ""]
        if e["status"] == "not installed":
            out.append(f"not installed: `{e['install']}`")
            continue
        if e["status"] == "error":
            out += ["Dump failed:", "", "```", e["error"], "```"]
            continue
        out.append("**Messages only in ours:** " + (", ".join(f"`{n}`" for n in e["only_in_ours"]) or "none"))
        out.append("")
        out.append("**Messages only in the SDK:** " + (", ".join(f"`{n}`" for n in e["only_in_sdk"]) or "none"))
        out.append("")
        if e["renamed_messages"]:
            out.append("**Paired under the rename map:** " +
                       ", ".join(f"`{o}` = `{s}`" for o, s in e["renamed_messages"].items()))
            out.append("")
        out.append(f"**Identical messages:** {len(e['identical'])}")
        for our_name, r in e["paired"].items():
            title = our_name if r["sdk_name"] == our_name else f"{our_name} / SDK {r['sdk_name']}"
            out += ["", f"### {title}", ""]
            for c in r["type_conflicts"]:
                out.append(f"- **type conflict** #{c['number']}: ours {_f(c['ours'])}, SDK {_f(c['sdk'])}")
            for c in r["renamed"]:
                out.append(f"- renamed #{c['number']}: ours `{c['ours']}`, SDK `{c['sdk']}` ({c['type']})")
            for c in r["added"]:
                note = " (reserved in ours)" if c["reserved_in_ours"] else ""
                out.append(f"- added in SDK #{c['number']}: {_f([c['name'], c['type'], c['label']])}{note}")
            for c in r["missing"]:
                out.append(f"- missing in SDK #{c['number']}: {_f([c['name'], c['type'], c['label']])}")
            for c in r["label_differences"]:
                out.append(f"- label #{c['number']} `{c['name']}`: ours `{c['ours'] or 'singular'}`, "
                           f"SDK `{c['sdk'] or 'singular'}`")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m conformance.drift", description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(REPO / "reports"), help="directory for schema-drift.{md,json}")
    ap.add_argument("--sdk", action="append", help="only these SDK keys (dx, dd, js, go, java)")
    args = ap.parse_args(argv)
    result = run(only=set(args.sdk) if args.sdk else None)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "schema-drift.json").write_text(json.dumps(result, indent=1) + "\n")
    (out / "schema-drift.md").write_text(render_markdown(result))
    for key, e in result["sdks"].items():
        if e["status"] == "ok":
            s = e["summary"]
            print(f"{key}: paired {s['paired']}, only ours {s['only_in_ours']}, only SDK {s['only_in_sdk']}, "
                  f"renamed {s['renamed']}, added {s['added']}, missing {s['missing']}, "
                  f"type conflicts {s['type_conflicts']}")
        else:
            print(f"{key}: {e['status']}" + (f": {e.get('install') or e.get('error')}"))
    print(f"wrote {out / 'schema-drift.md'} and {out / 'schema-drift.json'}")
    return 0 if all(e["status"] != "error" for e in result["sdks"].values()) else 1
