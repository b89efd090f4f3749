#!/usr/bin/env bash
# Compute the attestation golden vectors with daprd's own code and print them as JSON.
#
# Usage: scripts/attestation-vectors.sh [VECTORS.json]   (default: tests/wire/attestation_vectors.json)
#
# Builds scripts/attestation-vectors/ (a small Go program over durabletask-go's
# backend/historysigning, at the revision daprd v1.18.2 builds with) offline, from the Go module
# cache scripts/install-daprd.sh fills: nothing is downloaded. tests/wire/test_attestation_vectors.py
# runs it and compares its output with the vectors in the repository.
# Env: GO (default `go`), TASKHUB_CONFORMANCE_CACHE as for install-daprd.sh, DAPR_VERSION (v1.18.2).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
vectors=${1:-$here/../tests/wire/attestation_vectors.json}
cache_root=${TASKHUB_CONFORMANCE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/taskhub-conformance}
build_dir=$cache_root/daprd-${DAPR_VERSION:-v1.18.2}
GO=${GO:-go}

if [ ! -d "$build_dir/go/pkg/mod/cache/download" ]; then
  echo "attestation-vectors: no Go module cache at $build_dir/go (run scripts/install-daprd.sh first)" >&2
  exit 3
fi
if ! command -v "$GO" >/dev/null 2>&1; then
  echo "attestation-vectors: no Go toolchain ($GO); set GO=/path/to/go" >&2
  exit 3
fi

dapr_mod=$build_dir/go/pkg/mod/github.com/dapr/dapr@${DAPR_VERSION:-v1.18.2}/go.mod
if [ ! -f "$dapr_mod" ]; then
  echo "attestation-vectors: no dapr module in the cache ($dapr_mod); run scripts/install-daprd.sh" >&2
  exit 3
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$here/attestation-vectors/main.go" "$work/"
# daprd's own go.mod as the program's: the same build list (durabletask-go, x/text, protobuf) as the
# daprd binary, all of it already in the cache. scripts/attestation-vectors/go.mod names the two
# modules the program imports, for readers and editors.
sed '1s|^module .*|module taskhub-conformance/attestation-vectors|' "$dapr_mod" > "$work/go.mod"
cd "$work"
export GOPATH=$build_dir/go GOMODCACHE=$build_dir/go/pkg/mod GOCACHE=$build_dir/go-build
export GOPROXY="file://$GOMODCACHE/cache/download" GOSUMDB=off GOFLAGS=-mod=mod GOTOOLCHAIN=local
"$GO" run . < "$vectors"
