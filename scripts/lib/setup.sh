# Shared by scripts/demo and scripts/test: install what is missing, then build
# and install jaxonnx into .venv. Idempotent; a second run only rebuilds what
# changed (the CMake tree in build/pip and the venv are reused).
# shellcheck shell=bash

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="$ROOT/.venv"
BUILD_DIR="$ROOT/build/pip"
DEB_PACKAGES=(g++ libboost1.81-dev libboost-filesystem1.81-dev libprotobuf-dev protobuf-compiler doctest-dev)

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }

ensure_system_packages() {
  local missing=()
  for p in "${DEB_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  # Debian's python3 makes venvs only with python3-venv (it carries ensurepip).
  python3 -c "import ensurepip" 2>/dev/null || missing+=(python3 python3-venv)
  if ((${#missing[@]})); then
    say "installing Debian packages: ${missing[*]}"
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

ensure_venv() {
  if [ ! -x "$VENV/bin/python" ]; then
    say "creating $VENV"
    python3 -m venv "$VENV"
  fi
  local stamp="$VENV/.jaxonnx-requirements"
  if ! cmp -s "$ROOT/scripts/requirements.txt" "$stamp"; then
    say "installing Python packages into $VENV"
    "$VENV/bin/python" -m pip install -q --upgrade pip
    "$VENV/bin/python" -m pip install -q -r "$ROOT/scripts/requirements.txt"
    cp "$ROOT/scripts/requirements.txt" "$stamp"
  fi
  export PATH="$VENV/bin:$PATH"
}

build_and_install() {
  say "building and installing jaxonnx (build tree: ${BUILD_DIR#"$ROOT"/})"
  # Without build isolation the persistent build tree makes this incremental.
  "$VENV/bin/python" -m pip install -q --no-build-isolation --no-deps \
    -C build-dir="$BUILD_DIR" -C cmake.define.JAXONNX_BUILD_TESTS=ON "$ROOT"
}

setup_all() {
  ensure_system_packages
  ensure_venv
  build_and_install
}
