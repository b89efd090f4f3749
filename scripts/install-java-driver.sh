#!/usr/bin/env bash
# Build the durabletask-java driver (drivers/durabletask_java, a Maven project) into
# <repo>/.tools/java-driver/:
#   bin/durabletask-java-driver   the launcher (execs the Java found here with -jar); what target.yaml runs
#   durabletask-java-driver.jar   its manifest puts lib/*.jar on the class path
#   lib/                          the runtime dependencies (io.dapr:durabletask-client, gRPC, Jackson, ...)
#   .stamp                        what was built: sha256 of the driver sources, the Java used and its version
# Everything Maven downloads goes to <repo>/.tools/m2 (-Dmaven.repo.local): nothing global is touched.
#
# Usage: scripts/install-java-driver.sh          (from any directory; a no-op when already built)
#        scripts/install-java-driver.sh --check  exit 0 when the built driver matches its sources and Java,
#          else say why and exit 1 (builds nothing; `conformance run` asks it before any scenario)
#        scripts/install-java-driver.sh --sdk-version VERSION
#          instead of the pin: the driver built against another io.dapr:durabletask-client release
#          (a local build: publish it to a Maven repository Maven reaches, then give its version), as
#          <repo>/.tools/custom/java-driver/ (the pinned build is left alone); rebuilt every time.
# Env:   MVN=/path/to/mvn   Maven >= 3.6.3 (default: mvn on PATH)
#        JAVA=/path/to/java Java >= 17 (default: $JAVA_HOME/bin/java, else java on PATH)
#        FORCE=1            rebuild even when the stamp matches
#        OFFLINE=1          build from .tools/m2 only (mvn -o); by default a rebuild tries offline first
#                           and goes online only when .tools/m2 lacks something
set -euo pipefail

script_dir=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
repo_root=$(cd -- "$script_dir/.." && pwd -P)
project=$repo_root/drivers/durabletask_java
tools=$repo_root/.tools
out=$tools/java-driver
m2=$tools/m2
jar=$out/durabletask-java-driver.jar
launcher=$out/bin/durabletask-java-driver
stamp=$out/.stamp

log() { printf 'install-java-driver: %s\n' "$*" >&2; }
die() { printf 'install-java-driver: error: %s\n' "$*" >&2; exit 1; }

[[ -f $project/pom.xml ]] || die "missing $project/pom.xml"

sdk_override=()
check=0
case "${1:-}" in
  "") ;;
  --check) [[ $# -eq 1 ]] || die "usage: $0 --check"
    check=1 ;;
  --sdk-version)
    [[ $# -eq 2 && -n $2 ]] || die "usage: $0 [--sdk-version VERSION]"
    out=$tools/custom/java-driver
    jar=$out/durabletask-java-driver.jar
    launcher=$out/bin/durabletask-java-driver
    stamp=$out/.stamp
    sdk_override=("-Ddurabletask.version=$2")
    FORCE=1 ;;
  --sdk-path)
    die "--sdk-path is not supported for durabletask-java (a Gradle build): publish your checkout to a
Maven repository (e.g. ./gradlew publishToMavenLocal, with ~/.m2 as a mirror in settings.xml) and pass
--sdk-version with its version" ;;
  *) die "usage: $0 [--check | --sdk-version VERSION]" ;;
esac

if [[ -n ${JAVA:-} ]]; then
  java_bin=$JAVA
elif [[ -n ${JAVA_HOME:-} && -x $JAVA_HOME/bin/java ]]; then
  java_bin=$JAVA_HOME/bin/java
else
  java_bin=java
fi
command -v "$java_bin" >/dev/null 2>&1 ||
  die "'$java_bin' not found. Install a JDK >= 17 (e.g. apt-get install openjdk-17-jdk-headless) or set JAVA=/path/to/java."
java_path=$(readlink -f -- "$(command -v "$java_bin")")
java_version=$("$java_path" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java\.version = //p' | head -n1)
[[ -n $java_version ]] || die "cannot read the version of '$java_path'"
java_major=${java_version%%.*}
[[ $java_major =~ ^[0-9]+$ && $java_major -ge 17 ]] ||
  die "'$java_path' is Java $java_version; the driver needs Java >= 17"

# The stamp: every input of the build (pom and sources) and the Java that runs it.
sources_sha=$(cd "$project" && find pom.xml src -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum |
              sha256sum | cut -d' ' -f1)
want="sources=$sources_sha java=$java_version $java_path"
if ((check)); then
  [[ -f $jar && -x $launcher && -f $stamp ]] || { log "not built: $launcher"; exit 1; }
  [[ "$(head -n1 "$stamp")" == "$want" ]] ||
    { log "out of date: $launcher was built from other driver sources or another Java"; exit 1; }
  exit 0
fi
if [[ ${FORCE:-0} != 1 && -f $jar && -x $launcher && -f $stamp && "$(head -n1 "$stamp")" == "$want" ]]; then
  log "already built: $launcher ($(sed -n 2p "$stamp"))"
  exit 0
fi

MVN=${MVN:-mvn}
command -v "$MVN" >/dev/null 2>&1 ||
  die "'$MVN' not found. Install Maven >= 3.6.3 (e.g. apt-get install maven) or set MVN=/path/to/mvn."
[[ -x $(dirname -- "$java_path")/javac ]] ||
  die "no javac beside '$java_path': a JDK (not only a JRE) >= 17 is needed to build the driver"
# Maven compiles with the JDK of JAVA_HOME: make it the one checked above.
JAVA_HOME=$(cd -- "$(dirname -- "$java_path")/.." && pwd -P)
export JAVA_HOME

SECONDS=0
build=$out/build
mkdir -p "$out" "$m2"
rm -f "$stamp" # a failed build leaves no stamp, so the next run builds again
# Maven's own settings stay the user's (mirrors, proxies); only the repository is ours.
mvn_args=(-B -q -f "$project/pom.xml" "-Dmaven.repo.local=$m2" "-Ddriver.build.dir=$build"
          -Dmaven.test.skip=true -Dstyle.color=never ${sdk_override[@]+"${sdk_override[@]}"})
if [[ ${OFFLINE:-0} == 1 ]]; then
  mvn_args+=(-o)
elif [[ -d $m2/io/dapr/durabletask-client ]]; then
  # A rebuild usually needs nothing new: try offline first, so that it works without a network.
  if "$MVN" "${mvn_args[@]}" -o clean package >"$out/build.log" 2>&1; then
    mvn_args=()
  fi
fi
if ((${#mvn_args[@]})); then
  log "building $project (Maven repository $m2)"
  if ! "$MVN" "${mvn_args[@]}" clean package >"$out/build.log" 2>&1; then
    tail -n 40 "$out/build.log" >&2
    die "the Maven build failed (full log: $out/build.log). A download error means Maven Central
(or your mirror in ~/.m2/settings.xml) was not reachable; OFFLINE=1 builds from $m2 alone."
  fi
fi

[[ -f $build/durabletask-java-driver.jar && -d $build/lib ]] ||
  die "the build produced no $build/durabletask-java-driver.jar with lib/ (see $out/build.log)"
rm -rf "$out/lib"
cp "$build/durabletask-java-driver.jar" "$jar"
cp -r "$build/lib" "$out/lib"

sdk_jar=$(cd "$out/lib" && ls durabletask-client-*.jar 2>/dev/null | head -n1)
[[ -n $sdk_jar ]] || die "no durabletask-client jar among the dependencies in $out/lib"
sdk_version=${sdk_jar#durabletask-client-}
sdk_version=${sdk_version%.jar}

# The launcher execs, so that the harness's SIGTERM reaches the JVM itself. C1 only and the serial
# collector: a driver lives for one scenario, where start-up and first turns matter more than peak
# throughput. JAVA_OPTS adds (or overrides) JVM flags.
mkdir -p "$out/bin"
{
  printf '#!/bin/sh\n'
  printf '# Generated by scripts/install-java-driver.sh: the durabletask-java driver (io.dapr:durabletask-client:%s).\n' \
    "$sdk_version"
  printf 'here=$(CDPATH= cd -- "$(dirname -- "$0")/.." && pwd)\n'
  printf 'exec "%s" -XX:TieredStopAtLevel=1 -XX:+UseSerialGC ${JAVA_OPTS:-} -jar "$here/durabletask-java-driver.jar" "$@"\n' \
    "$java_path"
} >"$launcher"
chmod +x "$launcher"

# A smoke test: the driver starts, parses its arguments and refuses a bad one with exit 2.
set +e
"$launcher" --sidecar nonsense --canonical /dev/null >/dev/null 2>&1
rc=$?
set -e
((rc == 2)) || die "the built driver does not start ('$launcher --sidecar nonsense' exited $rc, expected 2)"

printf '%s\nio.dapr:durabletask-client:%s\n' "$want" "$sdk_version" >"$stamp"
log "built $launcher (io.dapr:durabletask-client:$sdk_version, Java $java_version) in ${SECONDS}s"
