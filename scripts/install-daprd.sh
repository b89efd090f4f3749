#!/usr/bin/env bash
# Build the Dapr runtime (daprd, placement, scheduler, sentry) from the Go module proxy, pinned, with only the
# components the conformance suite uses, and link it as <repo>/.tools/daprd/.
#
# The build (about 1,000 CPU-seconds) and its Go state live in a per-user cache directory keyed by
# version and component set, so a second clone on the same machine (or a CI run with that directory
# cached) links the binaries instead of rebuilding them:
#   ${TASKHUB_CONFORMANCE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/taskhub-conformance}/daprd-<version>/
#     go/ (GOPATH and module cache)  go-build/ (build cache)  src/ (trimmed dapr module)  bin/ (output)
#
# Usage: scripts/install-daprd.sh        (from any directory; a no-op when already installed)
# Env:   GO=/path/to/go to pick a specific Go toolchain (default: `go` on PATH).
#        TASKHUB_CONFORMANCE_CACHE=DIR to put the build cache elsewhere.
set -euo pipefail

# Pinned release. v1.18.3 is served but does not build: three modules of its closure are refused
# (durabletask-go v0.12.4, the pulsar-client-go fork its replace names, avro/v2 v2.33.1). v1.18.4 and
# v1.19.0 are not served at all. v1.18.2's whole closure is served.
readonly DAPR_MODULE=github.com/dapr/dapr
readonly PINNED_VERSION=v1.18.2
# DAPR_VERSION=vX.Y.Z builds another release into its own cache folder, linked as .tools/daprd-vX.Y.Z
# (the version matrix, conformance versions, points a daprd target at it); the pin keeps .tools/daprd.
# No v1.17.x builds here: the proxy serves only v1.17.0 and v1.17.5, and both need
# github.com/diagridio/go-etcd-cron v0.12.4 (refused; v1.17.5 also durabletask-go v0.11.1, refused).
readonly DAPR_VERSION=${DAPR_VERSION:-$PINNED_VERSION}
readonly DAPR_MIN_GO=1.26 # its go.mod says `go 1.26.5`; GOTOOLCHAIN=local, so any 1.26.x builds it
# The component registrations kept from cmd/daprd/components/ (each file registers one component and
# imports its SDK; the rest pull in every cloud SDK, several GB of modules). The suite's actor state
# stores, plus what daprd loads by default in self-hosted mode (mDNS name resolution, the local
# secret stores, the in-memory pub/sub).
readonly KEEP_COMPONENTS=(
  state_sqlite.go
  state_in-memory.go
  pubsub_in-memory.go
  nameresolution_mdns.go
  secretstores_local_env.go
  secretstores_local_file.go
)
# sentry (the CA: mTLS and SPIFFE identities) serves the daprd-mtls target (conformance/targets/sentry.py).
# A cache built before sentry was listed lacks its binary, so `installed` fails and it rebuilds once
# (the Go build cache keeps that to compiling and linking sentry, plus relinking the others).
readonly BINARIES=(daprd placement scheduler sentry)

script_dir=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
repo_root=$(cd -- "$script_dir/.." && pwd -P)
link=$repo_root/.tools/daprd
[[ $DAPR_VERSION == "$PINNED_VERSION" ]] || link=$repo_root/.tools/daprd-$DAPR_VERSION

log() { printf 'install-daprd: %s\n' "$*" >&2; }
die() { printf 'install-daprd: error: %s\n' "$*" >&2; exit 1; }

cache_root=${TASKHUB_CONFORMANCE_CACHE:-${XDG_CACHE_HOME:-${HOME:?HOME is not set; set XDG_CACHE_HOME or TASKHUB_CONFORMANCE_CACHE}/.cache}/taskhub-conformance}
build_dir=$cache_root/daprd-$DAPR_VERSION
bin_dir=$build_dir/bin
stamp=$bin_dir/version # read by conformance/targets/daprd.py for reports
want_stamp="$DAPR_VERSION ${KEEP_COMPONENTS[*]}"

installed() {
  [[ -f $stamp && "$(<"$stamp")" == "$want_stamp" ]] || return 1
  local b
  for b in "${BINARIES[@]}"; do [[ -x $bin_dir/$b ]] || return 1; done
}

link_tools() {
  mkdir -p "$repo_root/.tools"
  ln -sfn "$bin_dir" "$link"
}

# Idempotence: checked before looking for Go, so a cache hit does not need Go at all.
if installed; then
  link_tools
  log "already built: $bin_dir ($DAPR_VERSION), linked as $link"
  exit 0
fi

mkdir -p "$build_dir" || die "cannot create the cache directory $build_dir (set TASKHUB_CONFORMANCE_CACHE to a writable place)"
# Two clones installing at once share the cache: the second waits for the first, then finds it built.
if command -v flock >/dev/null 2>&1; then
  exec 9>"$build_dir/.lock"
  flock 9
  if installed; then
    link_tools
    log "built meanwhile by another install: $bin_dir ($DAPR_VERSION), linked as $link"
    exit 0
  fi
fi

GO=${GO:-go}
command -v "$GO" >/dev/null 2>&1 ||
  die "'$GO' not found. Install Go >= $DAPR_MIN_GO (https://go.dev/dl/) or set GO=/path/to/go."

# Build with exactly the toolchain we checked, never one go would download behind our back.
export GOTOOLCHAIN=local
go_version=$("$GO" env GOVERSION) || die "'$GO env GOVERSION' failed; is '$GO' a working Go toolchain?"
if [[ $go_version =~ ^go([0-9]+\.[0-9]+) ]]; then
  [[ $(printf '%s\n' "$DAPR_MIN_GO" "${BASH_REMATCH[1]}" | sort -V | head -n1) == "$DAPR_MIN_GO" ]] ||
    die "$DAPR_MODULE@$DAPR_VERSION needs Go >= $DAPR_MIN_GO, but '$GO' is $go_version."
else
  log "warning: cannot parse Go version '$go_version'; trying anyway"
fi

# Go state of this build only, next to its output; nothing global is read or written.
export GOPATH=$build_dir/go
export GOMODCACHE=$build_dir/go/pkg/mod
export GOCACHE=$build_dir/go-build
# Static binaries, no C compiler needed (the sqlite state store is pure Go).
export CGO_ENABLED=0
# -modcacherw: the module cache is normally read-only, which would make removing the cache fail.
# -trimpath: keeps the cache path out of the binaries.
export GOFLAGS="-modcacherw -trimpath"
user_goproxy=$("$GO" env GOPROXY)

SECONDS=0
log "downloading $DAPR_MODULE@$DAPR_VERSION (GOPROXY=$user_goproxy, $go_version)"
if ! dl_out=$(GOPROXY=$user_goproxy "$GO" mod download -json "$DAPR_MODULE@$DAPR_VERSION" 2>&1); then
  die "cannot download $DAPR_MODULE@$DAPR_VERSION from the Go module proxy:
$dl_out"
fi
mod_dir=$GOMODCACHE/$DAPR_MODULE@$DAPR_VERSION
[[ -f $mod_dir/go.mod && -d $mod_dir/cmd/daprd/components ]] ||
  die "$mod_dir does not look like the dapr module (no go.mod or cmd/daprd/components)"

# Mirrors that only serve pinned versions answer version-list lookups with 403, which go treats as
# fatal; the download cache goes first so it answers those from what is already downloaded, and the
# rest falls through to the user's proxy. Checksums are still checked against go.sum and GOSUMDB.
export GOPROXY="file://$GOMODCACHE/cache/download,$user_goproxy"

# The build runs in a copy of the dapr module as the main module: its own go.mod (replace directives
# included) and go.sum then apply unchanged, and component files can be removed, which an overlay
# cannot do inside the module cache. The copy is rebuilt from the pristine module every time.
src=$build_dir/src
rm -rf "$src"
cp -R "$mod_dir" "$src"
chmod -R u+w "$src"
components=$src/cmd/daprd/components
for keep in "${KEEP_COMPONENTS[@]}"; do
  [[ -f $components/$keep ]] || die "$DAPR_MODULE@$DAPR_VERSION has no cmd/daprd/components/$keep; update KEEP_COMPONENTS"
done
shopt -s nullglob
for f in "$components"/*.go; do
  name=${f##*/}
  [[ " ${KEEP_COMPONENTS[*]} " == *" $name "* ]] && continue
  # Files without a component tag (the no-tag panic, shared helpers) stay; the tag excludes the panic.
  grep -Eq '^//go:build .*(allcomponents|stablecomponents)' "$f" || continue
  grep -Eq '^//go:build !allcomponents && !stablecomponents' "$f" && continue
  rm -f "$f"
done

# Build into a staging dir and move into place only when all binaries built; a failed build leaves
# no stamp, so a rerun retries (reusing the module and build caches).
rm -f "$stamp"
staging=$(mktemp -d "$build_dir/.staging.XXXXXX")
trap 'rm -rf "$staging"' EXIT
ldflags="-X github.com/dapr/dapr/pkg/buildinfo.version=${DAPR_VERSION#v}"
pkgs=()
for b in "${BINARIES[@]}"; do pkgs+=("./cmd/$b"); done
log "building ${BINARIES[*]} of $DAPR_MODULE@$DAPR_VERSION with ${#KEEP_COMPONENTS[@]} components (10+ minutes on 2 cores; cached in $build_dir)"
(cd "$src" && "$GO" build -mod=readonly -tags stablecomponents -ldflags "$ldflags" -o "$staging/" "${pkgs[@]}") ||
  die "building $DAPR_MODULE@$DAPR_VERSION failed (see the output above); rerun to retry with the caches kept"
mkdir -p "$bin_dir"
for b in "${BINARIES[@]}"; do
  [[ -x $staging/$b ]] || die "the build produced no $b binary"
  mv -f "$staging/$b" "$bin_dir/$b"
done

# Check that daprd really is the pinned release before stamping it.
got=$("$bin_dir/daprd" --version 2>&1 | tr -d '[:space:]') || true
[[ $got == "${DAPR_VERSION#v}" ]] || die "$bin_dir/daprd --version printed '$got', expected ${DAPR_VERSION#v}"
printf '%s\n' "$want_stamp" >"$stamp"
link_tools
log "built $bin_dir ($DAPR_VERSION) in ${SECONDS}s, linked as $link"
