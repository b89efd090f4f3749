#!/usr/bin/env bash
# Install the Node SDK driver's dependencies:
#   drivers/durabletask_js/node_modules   @dapr/durabletask-js@1.0.0 (+ @grpc/grpc-js), exactly as
#                                         pinned by drivers/durabletask_js/package-lock.json
#
# Usage: scripts/install-js.sh
#        scripts/install-js.sh --sdk-path PATH | --sdk-version VERSION
#          instead of the pin: @dapr/durabletask-js from a local checkout (built: its package.json
#          "main" must exist, e.g. after `npm run build`) or another release, with a copy of the
#          driver in .sdk/js-custom/ (the pinned drivers/durabletask_js/node_modules is left alone);
#          reinstalled every time. `./dev sdk durabletask-js --sdk-path PATH` installs it and runs it.
# Env:   NODE     node binary (default: node, must be >= 20)
#        NPM      npm binary (default: npm)
#        FORCE=1  reinstall even when the stamp matches
#
# Idempotent: node_modules/.installed records the sha256 of package.json and package-lock.json and
# the node version; when they match, nothing is done. `npm ci` installs exactly the lock file
# (it never rewrites it) and runs no install scripts.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DRIVER="$ROOT/drivers/durabletask_js"
MODULES="$DRIVER/node_modules"
STAMP="$MODULES/.installed"
NODE="${NODE:-node}"
NPM="${NPM:-npm}"

die() { echo "install-js: error: $*" >&2; exit 1; }
log() { echo "install-js: $*"; }

custom=""
case "${1:-}" in
    "") ;;
    --sdk-path | --sdk-version) [[ $# -eq 2 ]] || { echo "usage: $0 [--sdk-path PATH | --sdk-version VERSION]" >&2; exit 2; }
        custom="$1" ;;
    *) echo "usage: $0 [--sdk-path PATH | --sdk-version VERSION]" >&2; exit 2 ;;
esac
command -v "$NODE" >/dev/null 2>&1 || die "'$NODE' not found: install Node.js >= 20 (or set NODE=/path/to/node)"
command -v "$NPM" >/dev/null 2>&1 || die "'$NPM' not found: install npm (it ships with Node.js) or set NPM=/path/to/npm"
NODE_VERSION="$("$NODE" --version)" || die "'$NODE' does not run"
NODE_MAJOR="${NODE_VERSION#v}"
NODE_MAJOR="${NODE_MAJOR%%.*}"
[[ "$NODE_MAJOR" =~ ^[0-9]+$ && "$NODE_MAJOR" -ge 20 ]] || die "'$NODE' is $NODE_VERSION; Node.js >= 20 is required"
[[ -f "$DRIVER/package.json" ]] || die "missing $DRIVER/package.json"
[[ -f "$DRIVER/package-lock.json" ]] || die "missing $DRIVER/package-lock.json (the pinned dependency tree)"

if [[ -n "$custom" ]]; then
    dest="$ROOT/.sdk/js-custom"
    if [[ "$custom" == --sdk-path ]]; then
        [[ -f "$2/package.json" ]] || die "--sdk-path $2: no package.json there; give the durabletask-js checkout"
        spec="$(cd "$2" && pwd)"
    else
        spec="@dapr/durabletask-js@$2"
    fi
    log "durabletask_js: driver copy in $dest with $spec"
    rm -rf "$dest"
    mkdir -p "$dest"
    cp "$DRIVER"/*.js "$DRIVER/package.json" "$DRIVER/package-lock.json" "$dest/"
    if ! (cd "$dest" && "$NPM" ci --ignore-scripts --no-audit --no-fund --loglevel=error \
          && "$NPM" install --no-save --ignore-scripts --no-audit --no-fund --loglevel=error "$spec"); then
        rm -rf "$dest"
        die "durabletask_js: installing $spec failed; nothing left in $dest"
    fi
    (cd "$dest" && "$NODE" -e 'require("@dapr/durabletask-js")') \
        || die "durabletask_js: $spec does not load (a checkout must be built first, e.g. npm run build)"
    log "durabletask_js: installed $spec into $dest"
    exit 0
fi

want="node=$NODE_VERSION sha256=$(cat "$DRIVER/package.json" "$DRIVER/package-lock.json" | sha256sum | cut -d' ' -f1)"
if [[ "${FORCE:-0}" != "1" && -f "$STAMP" && -f "$MODULES/@dapr/durabletask-js/package.json" ]] \
    && [[ "$(head -n1 "$STAMP")" == "$want" ]]; then
    log "durabletask_js: up to date ($MODULES)"
    exit 0
fi

log "durabletask_js: npm ci in $DRIVER (node $NODE_VERSION)"
if ! (cd "$DRIVER" && "$NPM" ci --ignore-scripts --no-audit --no-fund --loglevel=error); then
    rm -rf "$MODULES"
    die "durabletask_js: 'npm ci' failed (network, registry or a lock file out of step with package.json); nothing left in $MODULES"
fi
version="$("$NODE" -p 'require(process.argv[1]).version' "$MODULES/@dapr/durabletask-js/package.json")" \
    || die "durabletask_js: @dapr/durabletask-js is missing after npm ci"
[[ "$version" == "1.0.0" ]] || die "durabletask_js: installed @dapr/durabletask-js $version, expected 1.0.0"
{
    echo "$want"
    (cd "$DRIVER" && "$NPM" ls --all --loglevel=error 2>/dev/null) || true
} >"$STAMP.tmp"
mv "$STAMP.tmp" "$STAMP"
log "durabletask_js: installed @dapr/durabletask-js@$version"
