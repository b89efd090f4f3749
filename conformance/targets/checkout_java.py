"""The Java durable task client from a local checkout, then the driver built against it, into the
project's Maven repository; both offline once the repository holds what they need.

Two layouts: java-sdk (where io.dapr:durabletask-client lives today, 1.17 on), whose durabletask-client
module is built by its own Maven build; and the older durabletask-java repository, a Gradle build whose
wrapper fetches Gradle from outside the package registries, so its client module is compiled by
drivers/durabletask_java/checkout-client.pom.xml from the same sources and protos instead.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import zipfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from conformance.targets.checkout import Checkout, CheckoutError, _run
from conformance.targets.sources import Build, BuildStep


def _gradle_versions(checkout: Path) -> list[str]:
    """-D options for the versions the checkout's client/build.gradle names (the POM's defaults otherwise)."""
    gradle = checkout / "client" / "build.gradle"
    text = gradle.read_text(encoding="utf-8", errors="replace") if gradle.is_file() else ""
    out = []
    for prop, name in (("grpc.version", "grpcVersion"), ("protoc.version", "protocVersion"),
                       ("jackson.version", "jacksonVersion")):
        if m := re.search(rf"def\s+{name}\s*=\s*'([^']+)'", text):
            out.append(f"-D{prop}={m.group(1)}")
    if m := re.search(r"com\.google\.protobuf:protobuf-java:([\w.\-]+)", text):
        out.append(f"-Dprotobuf.version={m.group(1)}")
    return out


def _mvn(args: list[str], *, what: str, log: Path, env: dict[str, str]) -> None:
    """Offline first (a rebuild needs nothing new); online only when the repository lacks something."""
    mvn = os.environ.get("MVN", "mvn")
    if shutil.which(mvn) is None:
        raise CheckoutError(f"{what}: '{mvn}' not found; install Maven >= 3.6.3 (e.g. apt-get install maven) "
                            "or set MVN=/path/to/mvn")
    try:
        _run([mvn, "-o", *args], what=what, log=log, env=env)
    except CheckoutError:
        if os.environ.get("OFFLINE") == "1":
            raise
        _run([mvn, *args], what=what, log=log, env=env)


def _module_version(pom: Path) -> str:
    """The version a Maven module builds: its own <version>, else its parent's."""
    text = re.sub(r"<!--.*?-->", "", pom.read_text(encoding="utf-8", errors="replace"), flags=re.S)
    parent = re.search(r"<parent>.*?<version>([^<]+)</version>.*?</parent>", text, re.S)
    own = re.search(r"</parent>.*?<artifactId>durabletask-client</artifactId>\s*<version>([^<]+)</version>", text, re.S)
    found = own or parent
    if found is None:
        raise CheckoutError(f"{pom}: no <version> for durabletask-client")
    return found.group(1).strip()


def _java_sdk_client(c: Checkout, *, m2: Path, log: Path, env: dict[str, str], project: Path) -> str:
    """java-sdk's durabletask-client module built by its own Maven build into `m2`; its version."""
    version = _module_version(c.root / "durabletask-client" / "pom.xml")
    protos = c.root / "durabletask-client" / "target" / "proto"
    # The module fetches its protos during the build; once they are there, a rebuild skips the fetch
    # and can run offline.
    skip_fetch = ["-Ddownload.plugin.skip=true"] if protos.is_dir() and any(protos.glob("*.proto")) else []
    args = ["-B", "-q", f"-Dmaven.repo.local={m2}", "-f", str(c.root / "pom.xml"), "-pl", "durabletask-client",
            "-DskipTests", "-Dmaven.test.skip=true", "-Dcheckstyle.skip", "-Dspotbugs.skip", "-Djacoco.skip",
            "-Dmaven.javadoc.skip", "-Dgpg.skip", "-Dstyle.color=never", *skip_fetch, "install"]
    what = f"building java-sdk's durabletask-client in {c.root} with Maven"
    # The module alone once its parent POM is installed (a rebuild after an edit); with it (-am) the first time.
    if (m2 / "io" / "dapr" / "dapr-sdk-parent" / version).is_dir():
        try:
            _mvn(args, what=what, log=log, env=env)
            return version
        except CheckoutError:
            pass
    _mvn([*args[:-1], "-am", "install"], what=what, log=log, env=env)
    return version


def java_launcher(c: Checkout, *, project: Path, tools: Path) -> tuple[Path, bool, BuildStep]:
    """(the driver's launcher built against the checkout, whether its environment was created now, what was
    built)."""
    if c.layout.startswith("java-sdk"):
        return _launcher(c, project=project, tools=tools, build_client=_java_sdk_client)
    return _launcher(c, project=project, tools=tools, build_client=_gradle_checkout_client)


def _gradle_checkout_client(c: Checkout, *, m2: Path, log: Path, env: dict[str, str], project: Path) -> str:
    """durabletask-java's client module compiled by checkout-client.pom.xml into `m2`; the version given it."""
    if not (c.root / "internal" / "durabletask-protobuf" / "protos").is_dir():
        raise CheckoutError(f"--sdk-path {c.root}: no internal/durabletask-protobuf/protos there (the protos the "
                            "client is generated from); run `git submodule update --init` or its "
                            "downloadProtoFiles task once")
    version = "0.0.0-local-" + hashlib.sha256(str(c.root).encode()).hexdigest()[:10]
    _mvn(["-B", "-q", f"-Dmaven.repo.local={m2}", "-Dmaven.test.skip=true", "-Dstyle.color=never",
          "-f", str(project / "checkout-client.pom.xml"), f"-Dcheckout.dir={c.root}", f"-Dclient.version={version}",
          f"-Dbuild.dir={c.env_dir / 'client-build'}", *_gradle_versions(c.root), "install"],
         what=f"compiling the durabletask-java client of {c.root} with Maven", log=log, env=env)
    return version


# The sources whose digests decide how much a run rebuilds: the client's .java files (an edit to one is
# compiled alone) and what the whole build depends on (POMs, build files, protos: any change rebuilds all).
_SOURCES = {"java-sdk": ("durabletask-client/src/main/java/**/*.java", "pom.xml", "durabletask-client/pom.xml",
                         "durabletask-client/target/proto/*.proto"),
            "durabletask-java": ("client/src/main/java/**/*.java", "build.gradle", "client/build.gradle",
                                 "internal/durabletask-protobuf/protos/*.proto")}


def _launcher(c: Checkout, *, project: Path, tools: Path, build_client: Any) -> tuple[Path, bool, BuildStep]:
    """Two Maven builds (the client into the project's repository, then the driver against it) the first
    time and whenever a file was added or removed or a build file changed; after an edit to .java files
    only, those files compiled by javac into an overlay ahead of the client jar on the driver's classpath
    (the edits since the last Maven build, all of them, so a revert drops out); nothing when none changed.
    The launcher maps a class-data archive of the driver and its dependencies, which an edit leaves valid
    (java_cds.py)."""
    from conformance.targets.sources import compare, load, save, snapshot

    env = c.env_dir
    created = not env.is_dir()
    env.mkdir(parents=True, exist_ok=True)
    log = env / "build.log"
    log.write_text("", encoding="utf-8")
    java_home = os.environ.get("JAVA_HOME") or str(Path(os.path.realpath(shutil.which("javac") or "/usr/bin/javac"))
                                                  .parent.parent)
    build = env / "driver-build"
    jar = build / "durabletask-java-driver.jar"
    overlay = env / "client-overlay"
    table = snapshot(c.root, patterns=_SOURCES["java-sdk" if c.layout.startswith("java-sdk") else "durabletask-java"])
    base = load(env / "sources.json") if jar.is_file() else None
    changes = compare(base, table) if base is not None else None
    if (changes is not None and not (changes.added or changes.removed)
            and all(f.endswith(".java") for f in changes.modified)):
        try:
            compiled = _compile_overlay(c, files=changes.modified, overlay=overlay, lib=build / "lib", table=table,
                                        java_home=java_home, log=log)
            step = (BuildStep(build=Build.COMPILED, tool="javac", files=changes.modified) if compiled
                    else BuildStep(build=Build.UP_TO_DATE, tool=""))
            launcher, step = _ready(env, java_home=java_home, jar=jar, overlay=overlay, step=step, log=log)
            return launcher, created, step
        except CheckoutError:
            pass  # the whole Maven build below says what is wrong, as an author's own build would
    save(env / "sources.json", {})  # a build that fails half way leaves no table: the next run builds all
    shutil.rmtree(overlay, ignore_errors=True)
    m2 = tools / "m2"
    menv = {**os.environ, "JAVA_HOME": java_home}
    version = build_client(c, m2=m2, log=log, env=menv, project=project)
    try:
        _mvn(["-B", "-q", f"-Dmaven.repo.local={m2}", "-Dmaven.test.skip=true", "-Dstyle.color=never",
              "-f", str(project / "pom.xml"), f"-Ddriver.build.dir={build}", f"-Ddurabletask.version={version}",
              "package"], what=f"building the driver against {c.root}", log=log, env=menv)
    except CheckoutError as exc:
        if "cannot find symbol" in str(exc) or "does not exist" in str(exc):
            raise CheckoutError(f"{exc}\nThe driver is written against io.dapr:durabletask-client 1.17 (java-sdk's "
                                f"durabletask-client module); the client of {c.root} ({c.layout}) lacks part of that "
                                "API: give a java-sdk checkout instead.") from None
        raise
    if not jar.is_file():
        raise CheckoutError(f"the driver build produced no {jar} (log {log})")
    save(env / "sources.json", table)
    step = BuildStep(build=Build.FULL, tool="Maven")
    launcher, step = _ready(env, java_home=java_home, jar=jar, overlay=overlay, step=step, log=log)
    return launcher, created, step


def _compile_overlay(c: Checkout, *, files: tuple[str, ...], overlay: Path, lib: Path, table: dict[str, str],
                     java_home: str, log: Path) -> bool:
    """`files` (relative to the checkout) compiled into `overlay` against the last Maven build's classpath, as
    one jar; no overlay when there are none; nothing done
    when the overlay was made from the same sources. Whether javac ran."""
    from conformance.targets.sources import load, save

    stamp = overlay / "sources.json"
    wanted = {f: table[f] for f in files}
    if not files:
        shutil.rmtree(overlay, ignore_errors=True)
        return False
    if load(stamp) == wanted and (overlay / _OVERLAY_JAR).is_file():
        return False
    shutil.rmtree(overlay, ignore_errors=True)
    classes = overlay / "classes"
    classes.mkdir(parents=True)
    _run([str(Path(java_home) / "bin" / "javac"), "-proc:none", "-nowarn", "-encoding", "UTF-8", "-g",
          "-d", str(classes), "-cp", str(lib / "*"), *(str(c.root / f) for f in files)],
         what=f"javac of {', '.join(files)}", log=log)
    with zipfile.ZipFile(overlay / _OVERLAY_JAR, "w") as z:
        for f in sorted(classes.rglob("*.class")):
            z.write(f, f.relative_to(classes).as_posix())
    save(stamp, wanted)
    return True


_OVERLAY_JAR = "classes.jar"


def _manifest(jar: Path) -> dict[str, str]:
    """The main attributes of `jar`'s manifest (continuation lines joined)."""
    with zipfile.ZipFile(jar) as z:
        text = z.read("META-INF/MANIFEST.MF").decode("utf-8", errors="replace")
    joined = re.sub(r"\r?\n ", "", text)
    return {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in joined.splitlines()) if v}


# As scripts/install-java-driver.sh's launcher; the static archive is dumped with the same flags.
_JVM_FLAGS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")


@dataclass(frozen=True, kw_only=True)
class _Classpath:
    base: tuple[Path, ...]  # the dependencies' jars, then the driver's classes: what the archive holds
    sdk: tuple[Path, ...]  # the overlay (when there is one), then the client jar: loaded from the jars
    main: str


def _classpath(env: Path, *, jar: Path, overlay: Path) -> _Classpath:
    """The driver's classpath spelled out, the SDK's jars last: the driver jar's manifest names its dependencies
    (the client jar among them) in lib/; its classes are copied into a jar of their own without that manifest,
    so that the client jar comes only after them."""
    manifest = _manifest(jar)
    main = manifest.get("Main-Class")
    if not main:
        raise CheckoutError(f"{jar} names no Main-Class")
    named = [jar.parent / entry for entry in manifest.get("Class-Path", "").split()]
    client = [p for p in named if p.name.startswith("durabletask-client-")]
    if len(client) != 1:
        raise CheckoutError(f"{jar}: its manifest names {len(client)} durabletask-client jars, not one")
    classes = env / "driver-classes.jar"
    # Rewritten only after a driver build: the JVM checks each archived jar's size and time.
    if not classes.is_file() or classes.stat().st_mtime_ns < jar.stat().st_mtime_ns:
        partial = classes.with_name(classes.name + ".partial")
        with zipfile.ZipFile(jar) as src, zipfile.ZipFile(partial, "w") as out:
            for item in src.infolist():
                if item.filename != "META-INF/MANIFEST.MF":
                    out.writestr(item, src.read(item))
        os.replace(partial, classes)
    extra = overlay / _OVERLAY_JAR
    return _Classpath(base=(*(p for p in named if p not in client), classes),
                      sdk=(*((extra,) if extra.is_file() else ()), client[0]), main=main)


def _ready(env: Path, *, java_home: str, jar: Path, overlay: Path, step: BuildStep,
           log: Path) -> tuple[Path, BuildStep]:
    """The launcher, mapping the class-data archive of the driver and its dependencies (made now when missing:
    one training run and a dump), and `step` with a note of what became of the archive. The SDK's classes are
    not in it, so an edit (a new overlay) keeps the archive: only a Maven build, which writes new jars,
    makes another."""
    from conformance.targets import java_cds

    java = Path(java_home) / "bin" / "java"
    cp = _classpath(env, jar=jar, overlay=overlay)
    archives = env / "cds"
    archive = archives / f"{java_cds.key(java=java, classpath=[cp.base[-1], jar.parent / 'lib'])[:24]}.jsa"
    launcher = _write_launcher(env, java=java, cp=cp, archive=archive)
    refused = archive.with_suffix(".refused")  # a classpath whose training failed is not tried every run
    if archive.is_file() or refused.is_file():
        return launcher, step
    # The last few builds' archives stay (a build reverted finds its archive again); older ones go.
    for old in sorted(archives.glob("*.jsa"), key=lambda p: p.stat().st_mtime)[:-2]:
        old.unlink()
    why = java_cds.create_static(launcher=launcher, java=java, jvm_flags=_JVM_FLAGS, classpath=cp.base,
                                 leave_out=cp.sdk, archive=archive)
    with open(log, "a", encoding="utf-8") as out:
        out.write(f"class-data archive {archive}: {'made' if why is None else 'not made, ' + why}\n")
    if why is not None:
        refused.write_text(why + "\n", encoding="utf-8")
    step = replace(step, notes=(*step.notes, "class-data archive made" if why is None
                                else f"no class-data archive ({why}; {log})"))
    return _write_launcher(env, java=java, cp=cp, archive=archive), step


def _write_launcher(env: Path, *, java: Path, cp: _Classpath, archive: Path) -> Path:
    from conformance.targets.java_cds import flag

    launcher = env / "durabletask-java-driver"
    cds = flag(archive)
    # exec, so the harness's SIGTERM reaches the JVM.
    launcher.write_text("#!/bin/sh\n"
                        f'exec "{java}" {" ".join(_JVM_FLAGS)} {cds + " " if cds else ""}'
                        f'${{JAVA_OPTS:-}} -cp "{":".join(map(str, (*cp.base, *cp.sdk)))}" {cp.main} "$@"\n',
                        encoding="utf-8")
    launcher.chmod(0o755)
    return launcher


__all__ = ["java_launcher"]
