# turngate's image: a static binary (CGO off) on distroless, as a non-root
# user, its data folder on a volume. It runs against an external Postgres
# (DATABASE_URL) and verifies your platform's envelopes: set
# TURNGATE_ENVELOPE_PUBLIC_KEY or TURNGATE_ENVELOPE_JWKS_URL. Without
# either the binary would be in dev mode, which refuses this image's
# address (every interface), so the image does not start until it has a
# key. See deploy/compose.yaml for Postgres and three replicas behind one
# address. The same build, and that refusal, are tested without a
# container engine: server/container_test.go.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/turngate ./cmd/turngate

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/turngate /usr/local/bin/turngate
ENV TURNGATE_ADDR=0.0.0.0:8080 \
    TURNGATE_DATA=/data
VOLUME /data
USER nonroot:nonroot
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/turngate"]
CMD ["serve"]
