"""The Java driver's class-data archive (conformance/targets/java_cds.py): one training run of a launcher
writes an archive that a later JVM maps its classes from; its key follows the classpath's bytes and the JDK."""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from conformance.targets import java_cds

MAIN = """package p;
public class Main {
  public static void main(String[] a) throws Exception {
    if (a.length == 0) { System.out.println("no training"); return; }
    java.util.concurrent.CountDownLatch stop = new java.util.concurrent.CountDownLatch(1);
    sun.misc.Signal.handle(new sun.misc.Signal("TERM"), s -> stop.countDown());
    System.out.println("connected to " + a[1]);
    System.out.flush();
    stop.await();
  }
}
"""


@pytest.fixture
def driver(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(java, a one-class jar whose main prints a ready line and waits for SIGTERM, its launcher)."""
    javac = shutil.which("javac")
    if javac is None:
        pytest.fail("javac is not on PATH: install a JDK >= 17", pytrace=False)
    java = Path(javac).resolve().parent / "java"
    src = tmp_path / "src" / "p" / "Main.java"
    src.parent.mkdir(parents=True)
    src.write_text(MAIN, encoding="utf-8")
    subprocess.run([javac, "-nowarn", "-XDignore.symbol.file", "-d", str(tmp_path / "classes"), str(src)],
                   check=True, capture_output=True)
    jar = tmp_path / "m.jar"
    with zipfile.ZipFile(jar, "w") as z:
        for f in sorted((tmp_path / "classes").rglob("*.class")):
            z.write(f, f.relative_to(tmp_path / "classes").as_posix())
    launcher = tmp_path / "launch"
    launcher.write_text(f'#!/bin/sh\nexec "{java}" -XX:TieredStopAtLevel=1 -XX:+UseSerialGC ${{JAVA_OPTS:-}} '
                        f'-cp "{jar}" p.Main "$@"\n', encoding="utf-8")
    launcher.chmod(0o755)
    return java, jar, launcher


def test_a_training_run_makes_an_archive_a_later_jvm_maps_its_classes_from(driver, tmp_path):
    java, jar, launcher = driver
    archive = tmp_path / "cds" / "driver.jsa"
    assert java_cds.create(launcher=launcher, archive=archive) is None
    assert archive.is_file() and not archive.with_name("driver.jsa.partial").exists()
    ran = subprocess.run([str(java), "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", java_cds.flag(archive),
                          "-Xlog:class+load=info", "-cp", str(jar), "p.Main"], capture_output=True, text=True,
                         check=True)
    assert "p.Main source: shared objects file (top)" in ran.stdout


def test_a_launcher_that_never_gets_ready_makes_no_archive_and_says_why(tmp_path):
    launcher = tmp_path / "launch"
    launcher.write_text("#!/bin/sh\necho starting; exit 4\n", encoding="utf-8")
    launcher.chmod(0o755)
    archive = tmp_path / "driver.jsa"
    why = java_cds.create(launcher=launcher, archive=archive)
    assert why is not None and "did not connect" in why and "exit 4" in why
    assert not archive.exists() and java_cds.flag(archive) == ""


def test_the_key_follows_the_jars_bytes_and_a_folders_files(driver, tmp_path):
    java, jar, _ = driver
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "dep.jar").write_bytes(b"1")
    first = java_cds.key(java=java, classpath=[jar, lib])
    assert java_cds.key(java=java, classpath=[jar, lib]) == first
    (lib / "dep.jar").write_bytes(b"22")  # another dependency jar (its size): another archive
    second = java_cds.key(java=java, classpath=[jar, lib])
    assert second != first
    jar.write_bytes(jar.read_bytes() + b"\0")
    assert java_cds.key(java=java, classpath=[jar, lib]) != second


DEP = "package d;\npublic class Dep { public static String word() { return \"dep\"; } }\n"
SDK = "package s;\npublic class Sdk { public static String word() { return \"%s\"; } }\n"
APP = """package p;
public class App {
  public static void main(String[] a) throws Exception {
    System.out.println(d.Dep.word() + " " + s.Sdk.word());
    if (a.length == 0) return;
    java.util.concurrent.CountDownLatch stop = new java.util.concurrent.CountDownLatch(1);
    sun.misc.Signal.handle(new sun.misc.Signal("TERM"), x -> stop.countDown());
    System.out.println("connected to " + a[1]);
    System.out.flush();
    stop.await();
  }
}
"""


def _jar(tmp: Path, name: str, sources: dict[str, str], *, classpath: str = "") -> Path:
    src = tmp / f"{name}-src"
    for rel, text in sources.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text, encoding="utf-8")
    out = tmp / f"{name}-classes"
    subprocess.run([shutil.which("javac") or "javac", "-nowarn", "-XDignore.symbol.file", "-d", str(out),
                    *(["-cp", classpath] if classpath else []), *map(str, src.rglob("*.java"))],
                   check=True, capture_output=True)
    jar = tmp / f"{name}.jar"
    with zipfile.ZipFile(jar, "w") as z:
        for f in sorted(out.rglob("*.class")):
            z.write(f, f.relative_to(out).as_posix())
    return jar


def test_a_static_archive_leaves_the_sdk_out_and_stays_mapped_when_its_jars_change(driver, tmp_path):
    java = driver[0]
    sdk = _jar(tmp_path, "sdk", {"s/Sdk.java": SDK % "released"})
    app = _jar(tmp_path, "app", {"d/Dep.java": DEP, "p/App.java": APP}, classpath=str(sdk))
    flags = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"]
    launcher = tmp_path / "launch-app"
    launcher.write_text(f'#!/bin/sh\nexec "{java}" {" ".join(flags)} ${{JAVA_OPTS:-}} -cp "{app}:{sdk}" p.App "$@"\n',
                        encoding="utf-8")
    launcher.chmod(0o755)
    archive = tmp_path / "cds" / "base.jsa"
    assert java_cds.create_static(launcher=launcher, java=java, jvm_flags=flags, classpath=[app], leave_out=[sdk],
                                  archive=archive) is None
    assert archive.is_file() and not archive.with_name("base.jsa.partial").exists()
    # An edit: an overlay with the SDK's class changed, ahead of the SDK's jar, after the archive's classpath.
    overlay = _jar(tmp_path, "overlay", {"s/Sdk.java": SDK % "edited"})
    ran = subprocess.run([str(java), *flags, "-Xshare:on", java_cds.flag(archive), "-Xlog:class+load=info",
                          "-cp", f"{app}:{overlay}:{sdk}", "p.App"], capture_output=True, text=True, check=True)
    assert "dep edited" in ran.stdout  # the edited class runs, not an archived copy of the released one
    assert "d.Dep source: shared objects file" in ran.stdout
    assert f"s.Sdk source: file:{overlay}" in ran.stdout


def test_a_class_list_loses_the_left_out_jars_classes_and_their_lambda_proxies(tmp_path):
    sdk = tmp_path / "sdk.jar"
    with zipfile.ZipFile(sdk, "w") as z:
        z.writestr("s/Sdk.class", b"")
        z.writestr("s/Sdk$Inner.class", b"")
    listed = ("java/lang/Object id: 0\nd/Dep\ns/Sdk\ns/Sdk$Inner\n"
              "@lambda-proxy s/Sdk run ()Ljava/lang/Runnable; ()V REF_invokeStatic s/Sdk lambda$0 ()V ()V\n"
              "@lambda-proxy d/Dep run ()Ljava/lang/Runnable; ()V REF_invokeStatic d/Dep lambda$0 ()V ()V\n"
              "@lambda-form-invoker [LF_RESOLVE] java.lang.invoke.Invokers$Holder invokeExact_MT L7_L\n")
    kept = java_cds._without(listed, jars=[sdk]).splitlines()
    assert kept == ["java/lang/Object id: 0", "d/Dep", listed.splitlines()[5], listed.splitlines()[6]]
