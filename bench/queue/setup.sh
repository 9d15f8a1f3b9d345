#!/usr/bin/env bash
# Install the queue benchmark's peers into bench-only places, never into the library's
# dependencies:
#   build/bench-queue/venv   Celery 5 (celery[redis]), RQ, redis-py with hiredis
#                            (versions: bench/queue/requirements.txt)
#   build/bench-queue/node   BullMQ and ioredis (versions: bench/queue/bullmq/package-lock.json)
#
#   bench/queue/setup.sh [BUILD_DIR]     (default: build/bench-queue under the repository)
#
# Idempotent: each environment carries the checksum of the pin file it was installed from and
# is left alone while that matches. Debian packages it needs and lacks (python3-venv, nodejs,
# npm, redis-server, redis-tools) are installed with apt-get. The registries are reached only
# through pip and npm.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:-$root/build/bench-queue}
python=${PYTHON:-/usr/bin/python3}
mkdir -p "$out"

apt_install() {
  local sudo=()
  [[ $(id -u) == 0 ]] || sudo=(sudo)
  echo "setup: apt-get install $*" >&2
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "$@" >&2
}

# Debian's python3 has no ensurepip (so no working `python3 -m venv`) without python3-venv.
missing=()
[[ -x $python ]] && "$python" -c 'import ensurepip' 2>/dev/null || missing+=(python3 python3-venv)
command -v node >/dev/null && command -v npm >/dev/null || missing+=(nodejs npm)
command -v redis-server >/dev/null || missing+=(redis-server)
command -v redis-cli >/dev/null || missing+=(redis-tools)
if ((${#missing[@]})); then apt_install "${missing[@]}"; fi

stamp_matches() { [[ -f $2 ]] && [[ $(cat "$2") == $(sha256sum "$1" | cut -d' ' -f1) ]]; }

# Python peers.
venv=$out/venv
pins=$here/requirements.txt
if ! stamp_matches "$pins" "$venv/.pins.sha256" || [[ ! -x $venv/bin/python ]]; then
  rm -rf "$venv"
  "$python" -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check --no-input -r "$pins"
  sha256sum "$pins" | cut -d' ' -f1 >"$venv/.pins.sha256"
  versions=$("$venv/bin/pip" freeze | grep -iE '^(celery|rq|redis|hiredis)=' | tr '\n' ' ')
  echo "setup: $venv: $versions" >&2
fi

# Node peers: npm ci installs exactly the lock file's tree.
node_dir=$out/node
lock=$here/bullmq/package-lock.json
if ! stamp_matches "$lock" "$node_dir/.pins.sha256" ||
  [[ ! -d $node_dir/node_modules/bullmq ]]; then
  rm -rf "$node_dir"
  mkdir -p "$node_dir"
  cp "$here/bullmq/package.json" "$lock" "$node_dir/"
  (cd "$node_dir" && npm ci --omit=dev --no-audit --no-fund --loglevel=error >&2)
  sha256sum "$lock" | cut -d' ' -f1 >"$node_dir/.pins.sha256"
  version=$(node -p "require('$node_dir/node_modules/bullmq/package.json').version")
  echo "setup: $node_dir: bullmq $version" >&2
fi
