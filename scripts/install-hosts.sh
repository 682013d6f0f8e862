#!/usr/bin/env bash
# Install the pinned host CLIs (Codex, Claude Code, Pi) that the conformance and host tests and
# `git hermit doctor --hosts` run, into ${GIT_HERMIT_HOSTS_DIR:-$HOME/.cache/git-hermit/hosts}/node.
# Idempotent: a package already present at its pinned version is skipped.
# Usage: scripts/install-hosts.sh [codex] [claude-code] [pi]   (default: all three)
set -euo pipefail

HOSTS_DIR="${GIT_HERMIT_HOSTS_DIR:-$HOME/.cache/git-hermit/hosts}"
PREFIX="$HOSTS_DIR/node"

declare -A PACKAGES=(
  [codex]="@openai/codex@0.164.0"
  [claude-code]="@anthropic-ai/claude-code@2.1.317"
  [pi]="@mariozechner/pi-coding-agent@0.73.1"
)

command -v npm >/dev/null || { echo "error: npm is not installed (Node 20 or newer is needed)" >&2; exit 1; }

hosts=("$@")
[ ${#hosts[@]} -eq 0 ] && hosts=(codex claude-code pi)

installed_version() {  # the version of package $1 under $PREFIX, or nothing
  local manifest="$PREFIX/node_modules/$1/package.json"
  [ -f "$manifest" ] && node -p "require(process.argv[1]).version" "$manifest" 2>/dev/null || true
}

mkdir -p "$PREFIX"
for host in "${hosts[@]}"; do
  spec="${PACKAGES[$host]:-}"
  if [ -z "$spec" ]; then
    echo "error: unknown host '$host' (known: ${!PACKAGES[*]})" >&2
    exit 1
  fi
  name="${spec%@*}" version="${spec##*@}"
  if [ "$(installed_version "$name")" = "$version" ]; then
    echo "$host: $spec already installed in $PREFIX"
    continue
  fi
  echo "$host: installing $spec into $PREFIX"
  # claude-code declares engines.node >= 22 but ships a native binary that runs on Node 20;
  # pi's skipped install scripts (koffi, protobufjs) are not needed to run it.
  npm install --prefix "$PREFIX" --no-audit --no-fund --loglevel=error "$spec"
  got="$(installed_version "$name")"
  [ "$got" = "$version" ] || { echo "error: $name is at '$got' after install, expected $version" >&2; exit 1; }
done

for bin in codex claude pi; do   # pi prints its version on stderr
  [ -x "$PREFIX/node_modules/.bin/$bin" ] && echo "$bin: $("$PREFIX/node_modules/.bin/$bin" --version </dev/null 2>&1 | head -n 1)"
done
exit 0
