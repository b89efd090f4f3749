#!/usr/bin/env bash
# Install the third-party SDKs used by tests/sdk into their own virtualenvs:
#   .sdk/dx  dapr-ext-workflow==1.18.3 + dapr==1.18.3  (drivers/sdk_envs/dx.txt)
#   .sdk/dd  durabletask-dapr==0.17.4                  (drivers/sdk_envs/dd.txt)
#   .sdk/dapr dapr==1.19.0 (the workflow SDK in the core wheel) (drivers/sdk_envs/dapr.txt)
# Each SDK gets its own venv: dd's top-level package `durabletask` clashes with Microsoft's, and
# SDK protobuf modules must never share a process with ours.
#
# Usage: scripts/install-sdks.sh [dx|dd|dapr|all]     (default: all)
#        scripts/install-sdks.sh dx|dd|dapr --sdk-path PATH | --sdk-version VERSION
#          instead of the pin: the SDK from a local checkout (a folder pip can install, e.g. the
#          python-sdk's ext/dapr-ext-workflow) or another release, into .sdk/NAME-custom/ (the pinned
#          .sdk/NAME/ is left alone); reinstalled every time, since a checkout changes.
#          `./dev sdk NAME --sdk-path PATH` installs it and runs the library on it.
# Env:   PYTHON   interpreter used to create the venvs (default: python3, must be >= 3.11)
#        SDK_DIR  where the venvs go (default: .sdk/ of the checkout)
#        FORCE=1  reinstall even when the stamp matches
#
# Idempotent: .sdk/NAME/.installed records the sha256 of the requirements file and the python
# version; when both match, nothing is done.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ENVS_DIR="$ROOT/drivers/sdk_envs"
SDK_DIR="${SDK_DIR:-$ROOT/.sdk}"  # SDK_DIR: elsewhere (tests)
PYTHON="${PYTHON:-python3}"

die() { echo "install-sdks: error: $*" >&2; exit 1; }
log() { echo "install-sdks: $*"; }

usage() {
    echo "usage: $0 [dx|dd|dapr|all]    or: $0 dx|dd|dapr --sdk-path PATH | --sdk-version VERSION" >&2
    exit 2
}

command -v "$PYTHON" >/dev/null 2>&1 || die "'$PYTHON' not found (set PYTHON=/path/to/python3.11+)"
PY_VERSION="$("$PYTHON" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')" \
    || die "'$PYTHON' does not run"
"$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' \
    || die "'$PYTHON' is $PY_VERSION; python >= 3.11 is required"

install_one() {
    local name="$1"
    local req="$ENVS_DIR/$name.txt"
    local venv="$SDK_DIR/$name"
    local stamp="$venv/.installed"
    [[ -f "$req" ]] || die "missing requirements file $req"

    local want
    want="python=$PY_VERSION sha256=$(sha256sum "$req" | cut -d' ' -f1)"
    if [[ "${FORCE:-0}" != "1" && -f "$stamp" && -x "$venv/bin/python" ]] \
        && [[ "$(head -n1 "$stamp")" == "$want" ]]; then
        log "$name: up to date ($venv)"
        return 0
    fi

    log "$name: creating $venv with $PYTHON ($PY_VERSION)"
    rm -rf "$venv"
    mkdir -p "$SDK_DIR"
    "$PYTHON" -m venv "$venv" || die "$name: 'python -m venv' failed (is python3-venv installed?)"
    "$venv/bin/python" -m pip install --quiet --upgrade pip \
        || die "$name: upgrading pip in $venv failed"
    if ! "$venv/bin/python" -m pip install --quiet -r "$req"; then
        rm -rf "$venv"
        die "$name: pip install -r $req failed (network or pin problem); nothing left in $venv"
    fi
    # `pip check` catches the dapr/dapr-ext-workflow mismatch that an unpinned install produces.
    if ! "$venv/bin/python" -m pip check >/dev/null; then
        "$venv/bin/python" -m pip check >&2 || true
        rm -rf "$venv"
        die "$name: dependency conflict after install (see pip check above)"
    fi
    {
        echo "$want"
        grep -v -E '^\s*(#|$)' "$req"
        "$venv/bin/python" -m pip freeze
    } >"$stamp.tmp"
    mv "$stamp.tmp" "$stamp"
    log "$name: installed $(grep -v -E '^\s*(#|$)' "$req" | paste -sd' ')"
}

# The SDK's distribution names, for --sdk-version (dx pins dapr with the extension: see dx.txt).
custom_requirements() {
    case "$1" in
        dx) echo "dapr-ext-workflow==$2 dapr==$2" ;;
        dd) echo "durabletask-dapr==$2" ;;
        dapr) echo "dapr==$2" ;;
    esac
}

install_custom() {
    local name="$1" how="$2" what="$3"
    local venv="$SDK_DIR/$name-custom"
    if [[ "$how" == path ]]; then
        [[ -d "$what" ]] || die "--sdk-path $what: no such folder"
        [[ -f "$what/pyproject.toml" || -f "$what/setup.py" ]] \
            || die "--sdk-path $what: no pyproject.toml or setup.py there; give the folder of the SDK's Python package"
        what="$(cd "$what" && pwd)"
    fi
    log "$name: creating $venv with the SDK from $how $what"
    rm -rf "$venv"
    mkdir -p "$SDK_DIR"
    "$PYTHON" -m venv "$venv" || die "$name: 'python -m venv' failed"
    "$venv/bin/python" -m pip install --quiet --upgrade pip || die "$name: upgrading pip in $venv failed"
    local -a args
    if [[ "$how" == path ]]; then args=("$what"); else read -r -a args <<<"$(custom_requirements "$name" "$what")"; fi
    if ! "$venv/bin/python" -m pip install --quiet "${args[@]}"; then
        rm -rf "$venv"
        die "$name: pip install ${args[*]} failed; nothing left in $venv"
    fi
    "$venv/bin/python" -m pip check >&2 || log "warning: $name: pip check reports conflicts (above); running anyway"
    "$venv/bin/python" -m pip freeze >"$venv/.installed"
    log "$name: installed into $venv: $(grep -iE '^(dapr|dapr-ext-workflow|durabletask-dapr)( |=|@)' "$venv/.installed" | paste -sd' ')"
}

if [[ "${2:-}" == "--sdk-path" || "${2:-}" == "--sdk-version" ]]; then
    [[ $# -eq 3 && ( "$1" == dx || "$1" == dd || "$1" == dapr ) ]] || usage
    install_custom "$1" "$([[ "$2" == --sdk-path ]] && echo path || echo version)" "$3"
    exit 0
fi

target="${1:-all}"
[[ $# -le 1 ]] || usage
case "$target" in
    dx | dd | dapr) install_one "$target" ;;
    all) install_one dx; install_one dd; install_one dapr ;;
    -h | --help) usage ;;
    *) usage ;;
esac
