"""durabletask-java from a local checkout: its client module compiled with Maven
(drivers/durabletask_java/checkout-client.pom.xml) into the project's Maven repository, then the driver
built against that version, both offline once the repository holds what they need.

The checkout's own build is Gradle, whose wrapper fetches Gradle from outside the package registries;
the POM compiles the same sources and protos with what Maven Central serves.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from pathlib import Path

from conformance.targets.checkout import Checkout, CheckoutError, _run


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


def java_launcher(c: Checkout, *, project: Path, tools: Path) -> tuple[Path, bool]:
    """(the driver's launcher built against the checkout, whether its environment was created now)."""
    if not (c.root / "internal" / "durabletask-protobuf" / "protos").is_dir():
        raise CheckoutError(f"--sdk-path {c.root}: no internal/durabletask-protobuf/protos there (the protos the "
                            "client is generated from); run `git submodule update --init` or its "
                            "downloadProtoFiles task once")
    env = c.env_dir
    created = not env.is_dir()
    env.mkdir(parents=True, exist_ok=True)
    log = env / "build.log"
    log.write_text("", encoding="utf-8")
    m2 = tools / "m2"
    version = "0.0.0-local-" + hashlib.sha256(str(c.root).encode()).hexdigest()[:10]
    java_home = os.environ.get("JAVA_HOME") or str(Path(os.path.realpath(shutil.which("javac") or "/usr/bin/javac"))
                                                  .parent.parent)
    menv = {**os.environ, "JAVA_HOME": java_home}
    common = ["-B", "-q", f"-Dmaven.repo.local={m2}", "-Dmaven.test.skip=true", "-Dstyle.color=never"]
    _mvn([*common, "-f", str(project / "checkout-client.pom.xml"), f"-Dcheckout.dir={c.root}",
          f"-Dclient.version={version}", f"-Dbuild.dir={env / 'client-build'}", *_gradle_versions(c.root), "install"],
         what=f"compiling the durabletask-java client of {c.root} with Maven", log=log, env=menv)
    build = env / "driver-build"
    _mvn([*common, "-f", str(project / "pom.xml"), f"-Ddriver.build.dir={build}", f"-Ddurabletask.version={version}",
          "package"], what=f"building the driver against {c.root}", log=log, env=menv)
    jar = build / "durabletask-java-driver.jar"
    if not jar.is_file():
        raise CheckoutError(f"the driver build produced no {jar} (log {log})")
    launcher = env / "durabletask-java-driver"
    java = str(Path(java_home) / "bin" / "java")
    # As scripts/install-java-driver.sh's launcher: exec, so the harness's SIGTERM reaches the JVM.
    launcher.write_text("#!/bin/sh\n"
                        f'exec "{java}" -XX:TieredStopAtLevel=1 -XX:+UseSerialGC ${{JAVA_OPTS:-}} -jar "{jar}" "$@"\n',
                        encoding="utf-8")
    launcher.chmod(0o755)
    return launcher, created


__all__ = ["java_launcher"]
