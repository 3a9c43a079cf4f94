# syntax=docker/dockerfile:1

# mailsink: build the one static binary, then run it on distroless, which has
# CA certificates (for rediss://) and a non-root user, and nothing else.
#
#   docker build -t mailsink .
#   docker run -p 1025:1025 -p 8025:8025 -e MAILSINK_API_KEY=secret mailsink

FROM golang:1.26 AS build
WORKDIR /src
# Dependencies first, so that a source change does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=dev
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /mailsink ./cmd/mailsink
# The embedded store's directory, owned by distroless's nonroot user (65532).
RUN mkdir -p /data && chown 65532:65532 /data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /mailsink /mailsink
COPY --from=build --chown=65532:65532 /data /data
# Used only when no Redis is configured (MAILSINK_REDIS_URL / MAILSINK_REDIS_CLUSTER).
ENV MAILSINK_DATA_DIR=/data
VOLUME /data
# SMTP, HTTP (API, dashboard, /healthz, /readyz, /metrics).
EXPOSE 1025 8025
USER nonroot:nonroot
# Exits 0 when GET /readyz answers 200 (no shell or curl needed).
HEALTHCHECK --interval=10s --timeout=5s --start-period=5s CMD ["/mailsink", "healthcheck"]
ENTRYPOINT ["/mailsink", "serve"]
