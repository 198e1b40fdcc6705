# Factline gateway image: a static binary with the plugins in plugins/
# built in (as `make build` does), running as a non-root user.
#
#   docker build -t factline:local .
#   docker run -p 8080:8080 -e FACTLINE_DATABASE_URL=postgres://... factline:local
#
# With no FACTLINE_DATABASE_URL it serves the embedded SQLite store in /data.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN make plugins \
 && CGO_ENABLED=0 go build -trimpath -tags embedplugins -ldflags='-s -w' -o /out/factline ./cmd/factline \
 && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/factline /usr/local/bin/factline
COPY --from=build --chown=nonroot:nonroot /out/data /data
ENV FACTLINE_ADDR=:8080 \
    FACTLINE_DATA_DIR=/data \
    FACTLINE_PLUGIN_CACHE_DIR=/data/wasm-cache
USER nonroot:nonroot
EXPOSE 8080 9090
# /ready answers 200 once the domain model and start-up plugins are loaded.
HEALTHCHECK --interval=10s --timeout=4s --start-period=60s --retries=3 \
  CMD ["/usr/local/bin/factline", "probe", "--url", "http://127.0.0.1:8080/ready"]
ENTRYPOINT ["/usr/local/bin/factline"]
CMD ["serve"]
