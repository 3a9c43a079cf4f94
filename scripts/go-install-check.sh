#!/usr/bin/env bash
# go-install-check: show that `go install github.com/mailsink/mailsink/cmd/mailsink@VERSION` works, without the
# network. It publishes this checkout (its committed files plus tracked changes) as VERSION on a file-based module
# proxy laid out as the Go module proxy protocol describes (@v/list, .info, .mod, .zip), takes the dependencies from
# the local module cache, installs into a temporary GOBIN and runs `mailsink version`.
#
# go install refuses a module whose go.mod has a replace directive, so this fails if go.mod has one; it also
# publishes a copy with a replace added and checks that go install refuses it, so the check cannot pass by accident.
#
#   scripts/go-install-check.sh [VERSION]     (default v0.0.0-installcheck)
set -euo pipefail
cd "$(dirname "$0")/.."

version="${1:-v0.0.0-installcheck}"
module=$(go list -m)
tmp=$(mktemp -d /tmp/mailsink-install-check.XXXXXX)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT

if grep -Eq '^[[:space:]]*replace([[:space:]]|\()' go.mod; then
  echo "go-install-check: go.mod has a replace directive; go install $module/cmd/mailsink@VERSION refuses such a module" >&2
  exit 1
fi

command -v zip >/dev/null || { echo "go-install-check: needs zip (apt-get install zip)" >&2; exit 1; }
# The dependencies, into the module cache (a no-op when they are there); the install itself uses no network.
go mod download

# publish VERSION GOMOD_FILE: put the checkout on the local proxy as VERSION, with GOMOD_FILE as its go.mod.
publish() {
  local v=$1 gomod=$2 dir="$tmp/proxy/$module/@v" tree
  mkdir -p "$dir"
  echo "$v" >>"$dir/list"
  printf '{"Version":"%s","Time":"%s"}\n' "$v" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" >"$dir/$v.info"
  cp "$gomod" "$dir/$v.mod"
  # A module zip holds every file under the prefix module@version/ (no directory entries are needed).
  tree=$(git stash create 2>/dev/null || true)
  rm -rf "$tmp/src" && mkdir -p "$tmp/src/$module@$v"
  git archive "${tree:-HEAD}" | tar -x -C "$tmp/src/$module@$v"
  cp "$gomod" "$tmp/src/$module@$v/go.mod"
  (cd "$tmp/src" && zip -qr "$dir/$v.zip" "$module@$v")
}

# install VERSION: go install from the local proxy, then the module cache, and nothing else. The checksum
# database is not reachable offline (GOSUMDB=off): the local version is in no checksum database anyway, and the
# go command verified the cached dependencies when it downloaded them.
install() {
  env GOPROXY="file://$tmp/proxy,file://$(go env GOMODCACHE)/cache/download" \
    GOSUMDB=off GOFLAGS=-mod=mod GOTOOLCHAIN=local GOBIN="$tmp/bin" \
    go install "$module/cmd/mailsink@$1"
}

publish "$version" go.mod
install "$version"
"$tmp/bin/mailsink" version

# The same module with a replace directive must be refused.
cp go.mod "$tmp/replaced.mod"
printf '\nreplace github.com/emersion/go-smtp => ./third_party/go-smtp\n' >>"$tmp/replaced.mod"
publish "$version-replace" "$tmp/replaced.mod"
if install "$version-replace" >"$tmp/replace.log" 2>&1; then
  echo "go-install-check: go install accepted a module with a replace directive" >&2
  exit 1
fi
if ! grep -q "replace directives" "$tmp/replace.log"; then
  cat "$tmp/replace.log" >&2
  echo "go-install-check: go install refused the copy with a replace directive, but not for that" >&2
  exit 1
fi
echo "go-install-check: ok: go install $module/cmd/mailsink@$version works; a copy with a replace directive is refused"
