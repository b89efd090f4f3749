"""The version matrix's pure parts: the release catalogue, the cached environment's worker command,
and where a FAILED scenario appears or disappears along releases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conformance.events import Outcome, ScenarioFinished, to_json
from conformance.versions.catalogue import ReleasesError, Toolchain, load_releases
from conformance.versions.cells import CellResult, read_cell
from conformance.versions.envs import Env
from conformance.versions.matrix import changes, render_markdown
from conformance.versions.matrix import to_json as matrix_json

RELEASES = load_releases()


def test_every_sdk_lists_at_most_three_releases_newest_first_with_a_known_worker() -> None:
    from conformance.targets.registry import load_targets

    workers = load_targets().workers
    for name, rs in RELEASES.sdks.items():
        assert 1 <= len(rs) <= 3, name
        assert len({r.version for r in rs}) == len(rs), name
        for r in rs:
            assert r.worker in workers, f"{name} {r.version}: worker {r.worker} is not a target"
    assert [r.version for r in RELEASES.sdks["dapr-python"]][0] == "1.19.0"
    assert RELEASES.sdks["dapr-python"][0].worker == "dapr"


def test_selection_names_unknown_sdks_and_releases() -> None:
    assert [r.version for r in RELEASES.select_sdk("durabletask-dapr@0.17.2,0.17.4")] == ["0.17.4", "0.17.2"]
    with pytest.raises(ReleasesError, match="unknown SDK 'nope'; known: dapr-python"):
        RELEASES.select_sdk("nope")
    with pytest.raises(ReleasesError, match="no release 9.9.9"):
        RELEASES.select_engine("durabletask-go@9.9.9")


@pytest.mark.parametrize(("sdk", "declared", "want"), [
    ("durabletask-dapr", "{root}/.sdk/dd/bin/python {root}/drivers/durabletask_dapr/driver.py --sidecar {address} "
                         "--programs {programs}",
     "/c/bin/python {root}/drivers/durabletask_dapr/driver.py --sidecar {address} --programs {programs}"),
    ("durabletask-js", "node {root}/drivers/durabletask_js/driver.js --sidecar {address} --canonical {canonical}",
     "node /c/driver.js --sidecar {address} --canonical {canonical}"),
    ("durabletask-go", "{root}/.tools/bin/durabletask-go-driver --sidecar {address} --canonical {canonical}",
     "/c/durabletask-go-driver --sidecar {address} --canonical {canonical}"),
    ("durabletask-java", "{root}/.tools/java-driver/bin/durabletask-java-driver --sidecar {address} --canonical {canonical}",
     "/c/bin/durabletask-java-driver --sidecar {address} --canonical {canonical}"),
])
def test_the_worker_command_runs_the_cached_environment(sdk: str, declared: str, want: str) -> None:
    env = Env(release=RELEASES.sdks[sdk][0], path=Path("/c"), reused=True, seconds=0.0)
    assert env.worker_command(declared) == want


def _cell(sdk: str, version: str, engine: str, failed: dict[str, tuple[str, ...]]) -> CellResult:
    rel = next(r for r in RELEASES.sdks[sdk] if r.version == version)
    eng = RELEASES.select_engine(engine)[0]
    return CellResult(sdk=rel, engine=eng, counts={"PASSED": 3, "FAILED": len(failed)}, failed=failed,
                      broken=tuple(sorted({x for v in failed.values() for x in v})))


def test_a_failure_appears_and_disappears_along_the_sdk_releases() -> None:
    # newest first, as the catalogue lists them
    results = [_cell("durabletask-dapr", "0.17.4", "reference", {"a/x": ("R-1",)}),
               _cell("durabletask-dapr", "0.17.3", "reference", {"a/x": ("R-1",), "a/y": ("R-2",)}),
               _cell("durabletask-dapr", "0.17.2", "reference", {"a/y": ("R-2",), "a/z": ("R-3",)})]
    got = {(c.scenario, c.kind, c.at) for c in changes(results) if c.axis == "sdk"}
    assert got == {("a/x", "appears", "0.17.3"), ("a/y", "disappears", "0.17.4"), ("a/z", "disappears", "0.17.3")}
    text = render_markdown(results, command="conformance versions --sdk durabletask-dapr")
    assert "`a/x` on reference: appears at 0.17.3 (R-1)" in text
    assert "FAILED `a/y`: R-2" in text
    doc = json.loads(matrix_json(results, command="c"))
    assert {c["scenario"] for c in doc["changes"]} == {"a/x", "a/y", "a/z"}
    assert doc["cells"][0]["mustBroken"] == ["R-1"]


def test_a_failure_on_every_release_is_called_so_and_one_release_has_no_axis() -> None:
    results = [_cell("durabletask-dapr", "0.17.4", "reference", {"a/x": ("R-1",)}),
               _cell("durabletask-dapr", "0.17.3", "reference", {"a/x": ("R-1",)})]
    assert [(c.kind, c.at) for c in changes(results) if c.axis == "sdk"] == [("always", "0.17.3, 0.17.4")]
    assert changes(results[:1]) == []


def test_a_cell_is_read_from_its_run_events(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    finished = [ScenarioFinished(scenario="a/ok", pair="reference+dd", sidecar="reference", worker="dd",
                                 outcome=Outcome.PASSED, duration_s=1.0, requirements=("R-1",)),
                ScenarioFinished(scenario="a/bad", pair="reference+dd", sidecar="reference", worker="dd",
                                 outcome=Outcome.FAILED, duration_s=1.0, requirements=("R-1", "R-2"), broken=("R-2",)),
                ScenarioFinished(scenario="a/gap", pair="reference+dd", sidecar="reference", worker="dd",
                                 outcome=Outcome.KNOWN_FAILURE, duration_s=1.0, requirements=("R-3",), broken=("R-3",))]
    events.write_text("".join(to_json(e) + "\n" for e in finished))
    cell = read_cell(events, sdk=RELEASES.sdks["durabletask-dapr"][0], engine=RELEASES.select_engine("reference")[0],
                     wall_s=2.0)
    assert cell.counts == {"PASSED": 1, "FAILED": 1, "KNOWN_FAILURE": 1}
    assert cell.failed == {"a/bad": ("R-2",)} and cell.broken == ("R-2",) and cell.known == ("R-3",)


def test_toolchains_are_named_once() -> None:
    assert {r.toolchain for rs in RELEASES.sdks.values() for r in rs} == set(Toolchain)


def test_each_release_is_a_worker_target_of_its_own(tmp_path: Path) -> None:
    import yaml

    from conformance.targets.registry import load_targets
    from conformance.versions.run import release_target

    root = Path(__file__).resolve().parents[2]
    rel = RELEASES.select_sdk("dapr-python@1.18.1")[0]
    env = Env(release=rel, path=tmp_path / "env", reused=True, seconds=0.0)
    name, path = release_target(root, rel, env, tmp_path)
    assert name == "dapr-ext-workflow@1.18.1"
    raw = yaml.safe_load(path.read_text())["workers"][name]
    assert raw["command"].startswith(str(tmp_path / "env" / "bin" / "python") + " {root}/drivers/")
    target = load_targets(extra=[path]).workers[name]
    declared = load_targets().workers["dapr-ext-workflow"]
    assert target.version == "1.18.1" and target.capabilities == declared.capabilities
    assert target.gaps == declared.gaps


def test_a_traced_failure_names_its_trace_an_untraced_one_says_so_and_a_passing_one_is_stale(tmp_path: Path) -> None:
    from dataclasses import replace

    from conformance.versions.traced import load_traced

    path = tmp_path / "traced.yaml"
    path.write_text("traced:\n  - sdk: durabletask-dapr\n    releases: [0.17.3]\n    scenarios: ['a/x*', a/p]\n"
                    "    cause: a retry reuses its action id.\n    trace: worker.py:1445\n    fixed_by: 'in 0.17.4'\n")
    traces = load_traced(path)
    cell = _cell("durabletask-dapr", "0.17.3", "reference", {"a/x1": ("R-1",), "a/y": ("R-2",)})
    cell = replace(cell, outcomes={"a/x1": "FAILED", "a/y": "FAILED", "a/p": "PASSED"})
    other = _cell("durabletask-dapr", "0.17.4", "reference", {"a/x1": ("R-1",)})  # not a release it names
    text = render_markdown([cell, other], command="c", traces=traces)
    assert "2 FAILED (1 traced)" in text
    assert "FAILED `a/x1`: R-1; traced [T1]" in text and "FAILED `a/y`: R-2; **untraced**" in text
    assert "- [T1] durabletask-dapr 0.17.3: a retry reuses its action id. Trace: worker.py:1445 Fixed: in 0.17.4" in text
    assert "[T1] `a/p` PASSED on durabletask-dapr 0.17.3 on reference" in text
    assert text.count("traced [T1]") == 1  # 0.17.4's a/x1 is not covered
    doc = json.loads(matrix_json([cell, other], command="c", traces=traces))
    assert list(doc["cells"][0]["traced"]) == ["a/x1"] and doc["cells"][1]["traced"] == {}
    assert doc["staleTraces"] == [{"cell": "durabletask-dapr 0.17.3 on reference", "scenario": "a/p",
                                   "cause": "a retry reuses its action id."}]


@pytest.mark.parametrize("text, says", [("traced: {}\n", "'traced:' list"),
                                        ("traced:\n  - {sdk: x}\n", "needs exactly the keys"),
                                        ("traced:\n  - {sdk: x, releases: [], scenarios: [a], cause: c, trace: t, "
                                         "fixed_by: f}\n", "releases must be a non-empty list")])
def test_a_bad_traced_file_is_named(tmp_path: Path, text: str, says: str) -> None:
    from conformance.versions.traced import TracedError, load_traced

    path = tmp_path / "traced.yaml"
    path.write_text(text)
    with pytest.raises(TracedError, match=says):
        load_traced(path)


def test_a_trace_that_names_an_engine_holds_on_that_engine_only(tmp_path: Path) -> None:
    from conformance.versions.matrix import needs_attention, traced_in
    from conformance.versions.traced import TracedError, load_traced

    path = tmp_path / "traced.yaml"
    entry = ("traced:\n  - sdk: durabletask-js\n    releases: [1.0.0]\n    engines: [ENGINES]\n"
             "    scenarios: [purge/p]\n    cause: no taskExecutionId.\n    trace: key.go:19\n    fixed_by: none\n")
    path.write_text(entry.replace("ENGINES", "daprd@v1.18.2"))
    traces = load_traced(path)
    on_daprd = _cell("durabletask-js", "1.0.0", "daprd", {"purge/p": ("R-1",)})
    on_reference = _cell("durabletask-js", "1.0.0", "reference", {"purge/p": ("R-1",)})
    assert traced_in(on_daprd, traces) == {"purge/p": 0} and traced_in(on_reference, traces) == {}
    assert not needs_attention([on_daprd], traces) and needs_attention([on_reference], traces)
    path.write_text(entry.replace("ENGINES", "dapr"))
    with pytest.raises(TracedError, match=r"unknown engine 'dapr' \(did you mean 'daprd'\?\)"):
        load_traced(path)
    path.write_text(entry.replace("ENGINES", "daprd@v1.99.0"))
    with pytest.raises(TracedError, match="daprd has no release 'v1.99.0'"):
        load_traced(path)


def test_the_library_traced_file_names_known_releases() -> None:
    from conformance.versions.traced import load_traced

    library = Path(__file__).resolve().parents[2] / "scenarios"
    for t in load_traced():
        assert t.sdk in RELEASES.sdks, t
        assert set(t.releases) <= {r.version for r in RELEASES.sdks[t.sdk]}, t
        for s in t.scenarios:  # each names scenarios of the library
            assert list(library.glob(f"{s}.yaml")), f"{s}: no such scenario"


def test_only_an_untraced_failure_an_error_or_a_cell_not_run_needs_attention(tmp_path: Path) -> None:
    from dataclasses import replace

    from conformance.versions.matrix import needs_attention
    from conformance.versions.traced import load_traced

    path = tmp_path / "traced.yaml"
    path.write_text("traced:\n  - sdk: durabletask-dapr\n    releases: [0.17.3]\n    scenarios: ['a/x*']\n"
                    "    cause: a retry reuses its action id.\n    trace: worker.py:1445\n    fixed_by: 'in 0.17.4'\n")
    traces = load_traced(path)
    traced = _cell("durabletask-dapr", "0.17.3", "reference", {"a/x1": ("R-1",)})
    clean = _cell("durabletask-dapr", "0.17.4", "reference", {})
    assert not needs_attention([traced, clean], traces)
    assert needs_attention([_cell("durabletask-dapr", "0.17.3", "reference", {"a/x1": ("R-1",), "a/y": ("R-2",)})],
                           traces)
    assert needs_attention([_cell("durabletask-dapr", "0.17.4", "reference", {"a/x1": ("R-1",)})], traces)  # not its release
    assert needs_attention([replace(clean, errors={"a/z": "boom"})], traces)
    assert needs_attention([replace(clean, setup_error="pip: error")], traces)
    # A release declared unbuildable in releases.yaml is reported as not run, and keeps the exit.
    old = replace(clean, sdk=replace(clean.sdk, unbuildable="before the rename"), setup_error="go build: undefined")
    assert not needs_attention([traced, old], traces)
    assert "(declared in releases.yaml: before the rename)" in render_markdown([old], command="c", traces=traces)
    go = load_releases().select_sdk("durabletask-go")
    assert [r.version for r in go if r.unbuildable] == ["v0.11.0"]


def test_a_release_environment_is_keyed_by_what_its_driver_build_reads(tmp_path: Path) -> None:
    from conformance.versions.envs import _sources_hash

    go = load_releases().select_sdk("durabletask-go@v0.12.1")[0]
    src = tmp_path / "drivers" / "durabletask_go"
    src.mkdir(parents=True)
    (src / "main.go").write_text("package main\n", encoding="utf-8")
    (src / "target.yaml").write_text("workers: {}\n", encoding="utf-8")
    before = _sources_hash(tmp_path, go)
    # A capability or gap edited in the target file is read at run time: the cached build stays.
    (src / "target.yaml").write_text("workers: {x: {capabilities: [events]}}\n", encoding="utf-8")
    (src / "README.md").write_text("notes\n", encoding="utf-8")
    assert _sources_hash(tmp_path, go) == before
    (src / "main.go").write_text("package main\n// edited\n", encoding="utf-8")
    assert _sources_hash(tmp_path, go) != before


def test_a_replay_takes_any_release_made_like_the_nearest_listed_one() -> None:
    releases = load_releases()
    listed = releases.one_sdk_release("durabletask-go@v0.12.1")
    assert listed == releases.select_sdk("durabletask-go@v0.12.1")[0]
    # Not listed: the worker and requirements of the nearest listed release not newer, its version replaced.
    between = releases.one_sdk_release("dapr-python@1.18.2")
    assert (between.worker, between.spec, between.key) == (
        "dapr-ext-workflow", ("dapr-ext-workflow==1.18.2", "dapr==1.18.2"), "dapr-python-1.18.2")
    assert releases.one_sdk_release("dapr-python@1.19.1").spec == ("dapr==1.19.1",)
    assert releases.one_sdk_release("dapr-python@1.16.3").worker == "dapr-ext-workflow"  # older than every listed
    assert releases.one_sdk_release("dapr-python@0.5.0").spec[-1] == "durabletask==0.1.1a1"  # its `older:` entry
    assert releases.one_sdk_release("durabletask-java@1.17.0-rc-3").spec == ("io.dapr:durabletask-client:1.17.0-rc-3",)
    for bad, says in (("nosuch@1.0", "unknown SDK"), ("durabletask-go@v0.14.0,v0.12.1", "name one release"),
                      ("durabletask-go@", "name one release"), ("durabletask-go@a/b", "not a release number")):
        with pytest.raises(ReleasesError, match=says):
            releases.one_sdk_release(bad)
