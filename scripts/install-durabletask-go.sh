#!/usr/bin/env bash
# Install the standalone durabletask-go sidecar (main.go at the root of github.com/dapr/durabletask-go)
# as <repo>/.tools/bin/durabletask-go, reproducibly and without touching any global Go state:
# GOPATH, the module cache and the build cache all live under <repo>/.tools.
#
# Usage: scripts/install-durabletask-go.sh        (from any directory; a no-op when already installed)
# Env:   GO=/path/to/go to pick a specific Go toolchain (default: `go` on PATH).
set -euo pipefail

# Pinned tag. v0.14.0 was tried first and is served by the Go module proxy (origin commit 4028a08,
# the commit whose standalone behaviour docs/engine-rules.md marks [SA]) and builds with Go 1.26.
# v0.13.0, the fallback, is not served by the proxy we use (403 "This module version is not available").
readonly DTGO_MODULE=github.com/dapr/durabletask-go
readonly DTGO_PINNED=v0.14.0
# DTGO_VERSION=vX.Y.Z builds another release (v0.12.1 and v0.11.0 are served too) into the user cache,
# ${TASKHUB_CONFORMANCE_CACHE:-~/.cache/taskhub-conformance}/durabletask-go-vX.Y.Z/durabletask-go, for
# the version matrix (`conformance versions`); the pin stays .tools/bin/durabletask-go.
readonly DTGO_VERSION=${DTGO_VERSION:-$DTGO_PINNED}
readonly DTGO_MIN_GO=1.26 # the go.mod of v0.14.0 says `go 1.26.0`

script_dir=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
repo_root=$(cd -- "$script_dir/.." && pwd -P)
tools=$repo_root/.tools
bin_dir=$tools/bin
binary=$bin_dir/durabletask-go
stamp=$binary.version # read by conformance/targets/durabletask_go.py for reports
if [[ $DTGO_VERSION != "$DTGO_PINNED" ]]; then
  cache_root=${TASKHUB_CONFORMANCE_CACHE:-${XDG_CACHE_HOME:-${HOME:?HOME is not set}/.cache}/taskhub-conformance}
  bin_dir=$cache_root/durabletask-go-$DTGO_VERSION
  binary=$bin_dir/durabletask-go
  stamp=$binary.version
fi

log() { printf 'install-durabletask-go: %s\n' "$*" >&2; }
die() { printf 'install-durabletask-go: error: %s\n' "$*" >&2; exit 1; }

# Idempotence: checked before looking for Go, so a CI cache hit on .tools/ does not need Go at all.
if [[ -x $binary && -f $stamp && "$(<"$stamp")" == "$DTGO_VERSION" ]]; then
  log "already installed: $binary ($DTGO_VERSION)"
  exit 0
fi

GO=${GO:-go}
command -v "$GO" >/dev/null 2>&1 ||
  die "'$GO' not found. Install Go >= $DTGO_MIN_GO (https://go.dev/dl/) or set GO=/path/to/go."

# Build with exactly the toolchain we checked, never one go would download behind our back.
export GOTOOLCHAIN=local
go_version=$("$GO" env GOVERSION) || die "'$GO env GOVERSION' failed; is '$GO' a working Go toolchain?"
if [[ $go_version =~ ^go([0-9]+\.[0-9]+) ]]; then
  [[ $(printf '%s\n' "$DTGO_MIN_GO" "${BASH_REMATCH[1]}" | sort -V | head -n1) == "$DTGO_MIN_GO" ]] ||
    die "$DTGO_MODULE@$DTGO_VERSION needs Go >= $DTGO_MIN_GO, but '$GO' is $go_version."
else
  log "warning: cannot parse Go version '$go_version'; trying anyway"
fi

# Project-local Go state, so nothing outside the checkout is written.
export GOPATH=$tools/go
export GOMODCACHE=$tools/go/pkg/mod
export GOCACHE=$tools/go-build
# modernc.org/sqlite is pure Go: no C compiler needed on CI images, and the binary is static.
export CGO_ENABLED=0
# Replaces any GOFLAGS from the user's go env file so the build does not depend on machine config.
# -modcacherw: the module cache is normally read-only, which would make `rm -rf .tools` fail.
# -trimpath: keeps the checkout path out of the binary.
export GOFLAGS="-modcacherw -trimpath"
user_goproxy=$("$GO" env GOPROXY)

SECONDS=0
log "downloading $DTGO_MODULE@$DTGO_VERSION (GOPROXY=$user_goproxy, $go_version)"
if ! dl_out=$("$GO" mod download -json "$DTGO_MODULE@$DTGO_VERSION" 2>&1); then
  die "cannot download $DTGO_MODULE@$DTGO_VERSION from the Go module proxy:
$dl_out"
fi

# `go install mod@tag` only yields the sidecar if the proxy's copy has package main at the root.
mod_dir=$GOMODCACHE/$DTGO_MODULE@$DTGO_VERSION
grep -q '^package main$' "$mod_dir/main.go" 2>/dev/null ||
  die "$DTGO_MODULE@$DTGO_VERSION has no main.go with 'package main' at its root ($mod_dir); go install would not build the sidecar"

# `go install pkg@version` also asks the proxy for the module's version list, to print deprecation
# notices, and treats a failure there as fatal. Mirrors that only serve pinned versions answer
# @v/list with 403, so the download cache goes first in GOPROXY: it answers that lookup from what was
# just downloaded, and everything else falls through to the user's proxy. Checksums are still checked
# against GOSUMDB. The cost: a deprecation notice published after $DTGO_VERSION is not shown.
export GOPROXY="file://$GOMODCACHE/cache/download,$user_goproxy"

# Install into an empty staging dir and then move whatever comes out to the fixed name, so a
# different binary name cannot go unnoticed. A failed build leaves no stamp, so a rerun retries.
mkdir -p "$bin_dir"
rm -f "$stamp"
staging=$(mktemp -d "$tools/.staging.XXXXXX")
trap 'rm -rf "$staging"' EXIT
log "building $DTGO_MODULE@$DTGO_VERSION"
GOBIN=$staging "$GO" install "$DTGO_MODULE@$DTGO_VERSION" ||
  die "'go install $DTGO_MODULE@$DTGO_VERSION' failed (see the output above)"
shopt -s nullglob
built=("$staging"/*)
((${#built[@]} == 1)) || die "expected one binary from go install, got: ${built[*]:-nothing}"
mv -f "${built[0]}" "$binary"

# Check that the binary really is the pinned module's main package before stamping it.
"$GO" version -m "$binary" | grep -Eq "^[[:space:]]+mod[[:space:]]+$DTGO_MODULE[[:space:]]+$DTGO_VERSION([[:space:]]|$)" ||
  die "$binary does not report module $DTGO_MODULE $DTGO_VERSION in its build info"
printf '%s\n' "$DTGO_VERSION" >"$stamp"
log "installed $binary ($DTGO_VERSION) in ${SECONDS}s"
