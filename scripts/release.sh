#!/usr/bin/env bash
# Builds the binaries a user downloads, and their SHA256SUMS:
#   scripts/release.sh            # every platform, into dist/
#   OUT=/tmp/r PLATFORMS=linux/amd64 VERSION=v1.2.3 scripts/release.sh
# Each binary is static (CGO_ENABLED=0), built with -trimpath, and stamped
# with VERSION (default: git describe), which `mailsink version` prints.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION="${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo devel)}"
OUT="${OUT:-dist}"
PLATFORMS="${PLATFORMS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64}"

mkdir -p "$OUT"
rm -f "$OUT"/mailsink-* "$OUT"/SHA256SUMS
for platform in $PLATFORMS; do
  os="${platform%/*}" arch="${platform#*/}"
  name="mailsink-$VERSION-$os-$arch"
  [ "$os" = windows ] && name="$name.exe"
  echo "release: $OUT/$name"
  CGO_ENABLED=0 GOOS="$os" GOARCH="$arch" go build -trimpath \
    -ldflags "-s -w -X main.version=$VERSION" -o "$OUT/$name" ./cmd/mailsink
done
(cd "$OUT" && sha256sum mailsink-* > SHA256SUMS)
echo "release: $OUT/SHA256SUMS"
