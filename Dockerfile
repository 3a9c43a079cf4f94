# syntax=docker/dockerfile:1

# mailsink: build the one static binary, then run it on distroless, which has
# CA certificates (for rediss://) and a non-root user, and nothing else.
#
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) -t mailsink .
#   docker run -p 1025:1025 -p 8025:8025 -v mailsink-data:/data mailsink
#
# Base images are pinned by tag and digest, so a rebuild gets the same bytes;
# to move on, change both (docker buildx imagetools inspect IMAGE:TAG prints
# the digest). The Go tag matches go.mod's go line.

FROM golang:1.26.8-bookworm@sha256:a688600ca24f8a4d3ca77f95b0dd40704a9fc787c826660eb7ba0b641b8b175d AS build
WORKDIR /src
# Dependencies first, so that a source change does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# The version `mailsink version` and mailsink_build_info report; without it
# the image would say "devel" (the build context has no .git), so the build
# stops instead.
ARG VERSION
RUN test -n "$VERSION" || { echo 'build with --build-arg VERSION=$(git describe --tags --always --dirty)' >&2; exit 1; }
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /mailsink ./cmd/mailsink
# The embedded store's directory, owned by distroless's nonroot user (65532).
RUN mkdir -p /data && chown 65532:65532 /data

FROM gcr.io/distroless/static-debian12:nonroot@sha256:b7bb25d9f7c31d2bdd1982feb4dafcaf137703c7075dbe2febb41c24212b946f
COPY --from=build /mailsink /mailsink
COPY --from=build --chown=65532:65532 /data /data
# The embedded store's file (when no Redis is configured) and the generated
# API key of the default account (when no accounts file and no
# MAILSINK_API_KEY are given) live here: keep it on a volume.
ENV MAILSINK_DATA_DIR=/data
VOLUME /data
# SMTP, HTTP (API, dashboard, /healthz, /readyz, /metrics).
EXPOSE 1025 8025
USER nonroot:nonroot
# Exits 0 when GET /readyz answers 200 (no shell or curl needed).
HEALTHCHECK --interval=10s --timeout=5s --start-period=5s CMD ["/mailsink", "healthcheck"]
ENTRYPOINT ["/mailsink", "serve"]
