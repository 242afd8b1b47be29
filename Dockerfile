# turngate's image: a static binary (CGO off) on distroless, as a non-root
# user, its data folder on a volume. It runs against an external Postgres
# (DATABASE_URL); see deploy/compose.yaml for Postgres and three replicas
# behind one address. The same build is tested without a container
# engine: server/container_test.go.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/turngate ./server

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/turngate /usr/local/bin/turngate
ENV TURNGATE_ADDR=0.0.0.0:8080 \
    TURNGATE_DATA=/data
VOLUME /data
USER nonroot:nonroot
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/turngate"]
CMD ["serve"]
