# syntax=docker/dockerfile:1
# The Gale server image: the server, and the agent builds it registers at start and serves
# to endpoints, so the install one-liner works at once. Build with BuildKit, e.g.
#   docker build --build-arg VERSION=1.2.3 -t gale:1.2.3 .
# docs/operations.md ("Run in containers") describes its settings and compose.yaml.

# Every binary is cross-compiled on the build machine's own platform: they are static.
FROM --platform=$BUILDPLATFORM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=0.0.0-dev
ARG TARGETARCH
RUN make --no-print-directory agents DIST=/out VERSION="$VERSION" \
	&& make --no-print-directory servers DIST=/out VERSION="$VERSION" PLATFORMS="linux/${TARGETARCH:-amd64}" \
	&& mkdir -p /image/usr/bin /image/usr/lib/gale/agents /image/data \
	&& cp /out/gale-linux-"${TARGETARCH:-amd64}" /image/usr/bin/gale \
	&& cp -r /out/agents /image/usr/lib/gale/agents/"$VERSION"

# Static base: CA certificates, time zones, and the unprivileged user nonroot (65532).
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /image/usr /usr
COPY --from=build --chown=nonroot:nonroot /image/data /data
# The embedded SQLite database and generated development secrets live in the volume /data;
# set DATABASE_URL to a postgres:// URL for PostgreSQL (see compose.yaml).
ENV DATABASE_URL=sqlite:/data/gale.db \
	DATA_DIR=/data \
	AGENT_BUILDS_DIR=/usr/lib/gale/agents \
	LOG_FORMAT=json
VOLUME /data
EXPOSE 8080
USER nonroot:nonroot
ENTRYPOINT ["/usr/bin/gale"]
CMD ["serve"]
