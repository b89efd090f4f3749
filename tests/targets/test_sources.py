"""The loop's incremental builds: a source that changed is rebuilt, one that did not is not, and a file
added or removed (or a build configuration edited) takes the whole build (conformance/targets/sources.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conformance.targets import checkout as checkout_mod
from conformance.targets.checkout import _js_build, detect
from conformance.targets.sources import Build, BuildStep, compare, load, save, snapshot

TSC, NOTHING = Build.FULL, Build.UP_TO_DATE


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_snapshot_and_compare_name_what_changed(tmp_path):
    write(tmp_path / "src" / "a.ts", "1")
    write(tmp_path / "src" / "deep" / "b.ts", "2")
    write(tmp_path / "README.md", "not a source")
    first = snapshot(tmp_path, patterns=("src/**/*.ts",))
    assert sorted(first) == ["src/a.ts", "src/deep/b.ts"]
    assert compare(first, snapshot(tmp_path, patterns=("src/**/*.ts",))).none  # nothing touched
    os.utime(tmp_path / "src" / "a.ts")  # a touch without a change is not a change: contents are compared
    assert compare(first, snapshot(tmp_path, patterns=("src/**/*.ts",))).none
    write(tmp_path / "src" / "a.ts", "1 edited")
    write(tmp_path / "src" / "c.ts", "new")
    (tmp_path / "src" / "deep" / "b.ts").unlink()
    changes = compare(first, snapshot(tmp_path, patterns=("src/**/*.ts",)))
    assert (changes.modified, changes.added, changes.removed) == (("src/a.ts",), ("src/c.ts",), ("src/deep/b.ts",))


def test_the_table_round_trips_and_a_broken_one_means_build_all(tmp_path):
    stamp = tmp_path / "env" / "sources.json"
    assert load(stamp) is None
    save(stamp, {"src/a.ts": "x"})
    assert load(stamp) == {"src/a.ts": "x"}
    stamp.write_text("{not json", encoding="utf-8")
    assert load(stamp) is None


@pytest.fixture
def js_checkout(tmp_path, monkeypatch):
    """A durabletask-js-shaped checkout whose tsc is a script that records each call (the real one is
    exercised by bench/sdk_loop.py on a clone); the env lives under a cache of the test's own."""
    monkeypatch.setenv(checkout_mod.CACHE_ENV, str(tmp_path / "cache"))
    root = tmp_path / "js"
    write(root / "package.json", '{"name": "@dapr/durabletask-js"}')
    write(root / "tsconfig.json", "{}")
    write(root / "src" / "index.ts", "export const a = 1;\n")
    calls = tmp_path / "tsc-calls"
    tsc = write(root / "node_modules" / ".bin" / "tsc",
                f'#!/bin/sh\necho "$@" >> {calls}\nmkdir -p {root}/build && echo built > {root}/build/index.js\n')
    tsc.chmod(0o755)
    return detect(root), calls


def build(c, calls):
    did = _js_build(c, build=c.root / "build", node="node", log=c.env_dir / "build.log")
    return did.build, len(calls.read_text().splitlines()) if calls.exists() else 0


def test_js_builds_all_once_then_nothing_until_a_source_changes(js_checkout):
    c, calls = js_checkout
    assert build(c, calls) == (TSC, 1)
    assert build(c, calls) == (NOTHING, 1)  # unchanged: no tsc at all
    write(c.root / "src" / "extra.ts", "export const b = 2;\n")  # a new file: the whole build
    assert build(c, calls) == (TSC, 2)
    write(c.root / "tsconfig.json", '{"compilerOptions": {}}')  # the build's configuration: the whole build
    assert build(c, calls) == (TSC, 3)
    (c.root / "build" / "index.js").unlink()  # no build output: the whole build, whatever the table says
    assert build(c, calls) == (TSC, 4)


def test_js_an_edited_source_is_transpiled_alone_and_a_failure_forgets_the_table(js_checkout):
    c, calls = js_checkout
    assert build(c, calls) == (TSC, 1)
    write(c.root / "src" / "index.ts", "export const a = 2;\n")
    # This checkout has no node_modules/typescript, so the transpile fails: a clear error, and the table
    # is dropped so the next run rebuilds all instead of trusting a half-done build.
    with pytest.raises(checkout_mod.CheckoutError, match="transpiling src/index.ts"):
        build(c, calls)
    assert load(c.env_dir / "sources.json") == {}
    assert build(c, calls) == (TSC, 2)


def test_java_an_edited_client_source_is_compiled_alone_into_an_overlay_ahead_of_the_jar(tmp_path):
    """javac on the edited files against the last Maven build's classpath (here a one-class client jar);
    the same sources again compile nothing; no edits, no overlay; the launcher puts the overlay ahead of the
    client jar, and both after the driver's classes (the class-data archive's classpath, which the SDK's jars
    stay out of)."""
    import subprocess
    import shutil
    import zipfile

    from conformance.targets.checkout import Checkout
    from conformance.targets.checkout_java import _OVERLAY_JAR, _classpath, _compile_overlay, _write_launcher

    javac = shutil.which("javac")
    if javac is None:
        pytest.fail("javac is not on PATH: install a JDK >= 17", pytrace=False)
    java_home = str(Path(os.path.realpath(javac)).parent.parent)
    root = tmp_path / "java-sdk"
    src = write(root / "durabletask-client" / "src" / "main" / "java" / "p" / "A.java",
                "package p; public class A { public static int v() { return 1; } }\n")
    lib = tmp_path / "driver-build" / "lib"
    classes = tmp_path / "jar-classes"
    subprocess.run([javac, "-d", str(classes), str(src)], check=True)
    lib.mkdir(parents=True)
    client = lib / "durabletask-client-1.0.jar"
    with zipfile.ZipFile(client, "w") as z:
        z.write(classes / "p" / "A.class", "p/A.class")
    (lib / "dep.jar").write_bytes((lib / "durabletask-client-1.0.jar").read_bytes())
    jar = tmp_path / "driver-build" / "driver.jar"
    with zipfile.ZipFile(jar, "w") as z:
        z.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\nMain-Class: p.Main\nClass-Path: lib/dep.jar l\n"
                                           " ib/durabletask-client-1.0.jar\n")  # a continuation line, as Maven wraps
        z.writestr("p/Main.class", b"")
    c = Checkout(worker="durabletask-java", root=root, layout="java-sdk (durabletask-client module)", deps=())
    env = tmp_path / "env"
    overlay, log = env / "client-overlay", env / "build.log"
    write(src, "package p; public class A { public static int v() { return 2; } }\n")
    rel = src.relative_to(root).as_posix()
    table = snapshot(root, patterns=("durabletask-client/src/main/java/**/*.java",))

    assert _compile_overlay(c, files=(rel,), overlay=overlay, lib=lib, table=table, java_home=java_home, log=log)
    with zipfile.ZipFile(overlay / _OVERLAY_JAR) as z:
        assert z.namelist() == ["p/A.class"]
    java = Path(java_home) / "bin" / "java"
    archive = env / "cds" / "x.jsa"
    cp = _classpath(env, jar=jar, overlay=overlay)
    classes_jar = env / "driver-classes.jar"
    assert cp.base == (lib / "dep.jar", classes_jar) and cp.sdk == (overlay / _OVERLAY_JAR, client)
    with zipfile.ZipFile(classes_jar) as z:  # the driver's classes without the manifest naming the client jar
        assert z.namelist() == ["p/Main.class"]
    launcher = _write_launcher(env, java=java, cp=cp, archive=archive).read_text()
    assert f'-cp "{lib / "dep.jar"}:{classes_jar}:{overlay / _OVERLAY_JAR}:{client}" p.Main' in launcher
    assert "SharedArchiveFile" not in launcher  # no archive made yet
    write(archive, "made")
    assert f"-XX:SharedArchiveFile={archive} " in _write_launcher(env, java=java, cp=cp, archive=archive).read_text()
    assert not _compile_overlay(c, files=(rel,), overlay=overlay, lib=lib, table=table, java_home=java_home, log=log)
    assert log.read_text().count("javac") == 1  # the same edit again: not recompiled

    assert not _compile_overlay(c, files=(), overlay=overlay, lib=lib, table=table, java_home=java_home, log=log)
    assert not overlay.exists()  # reverted: the jar's classes again


def test_build_step_says_what_was_built():
    assert BuildStep(build=Build.UP_TO_DATE, tool="").describe() == "sources up to date, nothing built"
    assert BuildStep(build=Build.COMPILED, tool="javac", files=("a", "b")).describe() == "2 files compiled by javac"
    assert BuildStep(build=Build.TRANSPILED, tool="tsc", files=("a",)).describe() == "1 file transpiled by tsc"
    assert BuildStep(build=Build.FULL, tool="Maven", notes=("class-data archive made",)).describe() == \
        "full build (Maven); class-data archive made"
