#!/usr/bin/env bash
# Build the durabletask-go SDK driver (drivers/durabletask_go, a Go module that requires
# github.com/dapr/durabletask-go at the tag pinned in its go.mod and go.sum) as
# <repo>/.tools/bin/durabletask-go-driver, reproducibly and without touching any global Go state:
# GOPATH, the module cache and the build cache all live under <repo>/.tools (shared with
# scripts/install-durabletask-go.sh).
#
# Usage: scripts/install-go-driver.sh      (from any directory; a no-op when the binary is current)
#        scripts/install-go-driver.sh --check  exit 0 when the binary matches the driver's sources and pin,
#          else say why and exit 1 (builds nothing; `conformance run` asks it before any scenario)
#        scripts/install-go-driver.sh --sdk-path PATH | --sdk-version VERSION
#          instead of the pin: the driver built against a local checkout of durabletask-go (a
#          `replace` directive) or another version, as <repo>/.tools/custom/durabletask-go-driver
#          (the pinned binary is left alone); rebuilt every time.
#          `./dev sdk durabletask-go-worker --sdk-path PATH` builds it and runs it.
# Env:   GO=/path/to/go to pick a specific Go toolchain (default: `go` on PATH).
#
# The stamp next to the binary records the SDK tag and a hash of the driver's sources, so editing
# the driver (or go.mod/go.sum) rebuilds it and nothing else does.
set -euo pipefail

script_dir=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
repo_root=$(cd -- "$script_dir/.." && pwd -P)
src=$repo_root/drivers/durabletask_go
tools=$repo_root/.tools
bin_dir=$tools/bin
binary=$bin_dir/durabletask-go-driver
stamp=$binary.stamp
readonly SDK_MODULE=github.com/dapr/durabletask-go
readonly MIN_GO=1.26 # the go.mod of durabletask-go v0.14.0 says `go 1.26.0`

log() { printf 'install-go-driver: %s\n' "$*" >&2; }
die() { printf 'install-go-driver: error: %s\n' "$*" >&2; exit 1; }

custom=${1:-}
check=0
case "$custom" in
  "") ;;
  --check) [[ $# -eq 1 ]] || die "usage: $0 --check"
    check=1 custom="" ;;
  --sdk-path | --sdk-version) [[ $# -eq 2 ]] || die "usage: $0 [--sdk-path PATH | --sdk-version VERSION]"
    [[ $custom == --sdk-version || -f $2/go.mod ]] || die "--sdk-path $2: no go.mod there; give the durabletask-go checkout" ;;
  *) die "usage: $0 [--check | --sdk-path PATH | --sdk-version VERSION]" ;;
esac

[[ -f $src/go.mod && -f $src/go.sum ]] || die "$src/go.mod or go.sum is missing; is this a complete checkout?"

# The SDK tag, from go.mod (the single source of truth for the driver's pin).
sdk_version=$(awk -v m="$SDK_MODULE" '$1 == m && $2 ~ /^v/ {print $2} $1 == "require" && $2 == m {print $3}' "$src/go.mod" | head -n1)
[[ -n $sdk_version ]] || die "$src/go.mod does not require $SDK_MODULE"
sidecar_version=$(sed -n 's/^readonly DTGO_VERSION=\(v[^ ]*\).*/\1/p' "$script_dir/install-durabletask-go.sh" 2>/dev/null || true)
if [[ -n $sidecar_version && $sidecar_version != "$sdk_version" ]]; then
  log "warning: the driver pins $SDK_MODULE $sdk_version but scripts/install-durabletask-go.sh pins $sidecar_version"
fi

# Idempotence: decided before looking for Go, so a CI cache hit on .tools/ does not need Go at all.
sources_hash=$(cd "$src" && find . -maxdepth 1 -type f \( -name '*.go' ! -name '*_test.go' -o -name go.mod -o -name go.sum \) \
  -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
want_stamp="$sdk_version $sources_hash"
if ((check)); then
  [[ -x $binary && -f $stamp ]] || { log "not built: $binary"; exit 1; }
  [[ "$(<"$stamp")" == "$want_stamp" ]] ||
    { log "out of date: $binary was built from other driver sources or another $SDK_MODULE"; exit 1; }
  exit 0
fi
if [[ -z $custom && -x $binary && -f $stamp && "$(<"$stamp")" == "$want_stamp" ]]; then
  log "already installed: $binary ($SDK_MODULE $sdk_version, sources $sources_hash)"
  exit 0
fi

GO=${GO:-go}
command -v "$GO" >/dev/null 2>&1 ||
  die "'$GO' not found. Install Go >= $MIN_GO (https://go.dev/dl/) or set GO=/path/to/go."

# Build with exactly the toolchain we checked, never one go would download behind our back.
export GOTOOLCHAIN=local
go_version=$("$GO" env GOVERSION) || die "'$GO env GOVERSION' failed; is '$GO' a working Go toolchain?"
if [[ $go_version =~ ^go([0-9]+\.[0-9]+) ]]; then
  [[ $(printf '%s\n' "$MIN_GO" "${BASH_REMATCH[1]}" | sort -V | head -n1) == "$MIN_GO" ]] ||
    die "$SDK_MODULE@$sdk_version needs Go >= $MIN_GO, but '$GO' is $go_version."
else
  log "warning: cannot parse Go version '$go_version'; trying anyway"
fi

# Project-local Go state, so nothing outside the checkout is written.
export GOPATH=$tools/go
export GOMODCACHE=$tools/go/pkg/mod
export GOCACHE=$tools/go-build
export CGO_ENABLED=0
# -mod=readonly: go.mod and go.sum are committed and must not change during a build (a missing
# checksum is an error, not a silent update). -modcacherw: lets `rm -rf .tools` work.
export GOFLAGS="-mod=readonly -modcacherw -trimpath"

SECONDS=0
if [[ -n $custom ]]; then
  out_dir=$tools/custom
  build=$out_dir/src
  rm -rf "$build"
  mkdir -p "$build"
  cp "$src"/*.go "$src/go.mod" "$src/go.sum" "$build/"
  rm -f "$build"/*_test.go
  if [[ $custom == --sdk-path ]]; then
    sdk_src=$(cd "$2" && pwd -P)
    (cd "$build" && "$GO" mod edit -replace "$SDK_MODULE=$sdk_src") || die "go mod edit -replace failed"
    what="$SDK_MODULE => $sdk_src"
  else
    (cd "$build" && GOFLAGS=-modcacherw "$GO" get "$SDK_MODULE@$2") || die "go get $SDK_MODULE@$2 failed"
    what="$SDK_MODULE $2"
  fi
  # A release without detached workflows (task/detached.go) gets the driver's nodetached variant, which
  # refuses spawn steps as a capability gap (drivers/durabletask_go/detached_absent.go).
  sdk_dir=$(cd "$build" && GOFLAGS="-mod=mod -modcacherw" "$GO" list -m -f '{{.Dir}}' "$SDK_MODULE") ||
    die "cannot locate $what in the module cache"
  tags=()
  if [[ ! -f $sdk_dir/task/detached.go ]]; then
    tags=(-tags nodetached)
    log "$what has no detached workflows (no task/detached.go): spawn steps will be refused"
  fi
  log "building $out_dir/durabletask-go-driver with $what"
  # -mod=mod: the copy's go.mod/go.sum follow the replaced or changed SDK's requirements.
  (cd "$build" && GOFLAGS="-mod=mod -modcacherw -trimpath" "$GO" build "${tags[@]}" -o "$out_dir/durabletask-go-driver" .) ||
    die "'go build' against $what failed (see the output above)"
  log "installed $out_dir/durabletask-go-driver ($what) in ${SECONDS}s"
  exit 0
fi
# Only the modules go.mod names at their exact versions are fetched (no version-list lookups, which
# pinned-only mirrors refuse); checksums are verified against go.sum.
log "downloading the modules of $src (GOPROXY=$("$GO" env GOPROXY), $go_version)"
if ! dl_out=$(cd "$src" && "$GO" mod download 2>&1); then
  die "cannot download the driver's modules from the Go module proxy:
$dl_out"
fi

# Build into a staging file and move it into place, so a failed build never leaves a half-written
# binary; without a stamp a rerun retries.
mkdir -p "$bin_dir"
rm -f "$stamp"
staging=$(mktemp -d "$tools/.staging.XXXXXX")
trap 'rm -rf "$staging"' EXIT
log "building $binary"
(cd "$src" && "$GO" build -o "$staging/durabletask-go-driver" .) ||
  die "'go build' in $src failed (see the output above)"
mv -f "$staging/durabletask-go-driver" "$binary"

# Check that the binary really links the pinned SDK before stamping it.
"$GO" version -m "$binary" | grep -Eq "^[[:space:]]+dep[[:space:]]+$SDK_MODULE[[:space:]]+$sdk_version([[:space:]]|$)" ||
  die "$binary does not report dependency $SDK_MODULE $sdk_version in its build info"
printf '%s\n' "$want_stamp" >"$stamp"
log "installed $binary ($SDK_MODULE $sdk_version) in ${SECONDS}s"
