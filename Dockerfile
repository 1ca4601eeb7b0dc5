# syntax=docker/dockerfile:1
# Build a static polycrate-operator binary and ship it on distroless, as a non-root user.
FROM golang:1.26 AS builder
ARG TARGETOS=linux
ARG TARGETARCH=amd64
ARG VERSION=dev
ARG COMMIT=unknown
ARG BUILD_DATE=unknown
WORKDIR /workspace

# Dependencies first, so they are cached across source changes.
COPY go.mod go.sum ./
RUN go mod download

COPY api/ api/
COPY cmd/ cmd/
COPY config/crd/ config/crd/
COPY internal/ internal/

RUN CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} go build -trimpath -tags grpcnotrace \
    -ldflags "-s -w \
      -X github.com/polycrate/polycrate-operator/internal/version.Version=${VERSION} \
      -X github.com/polycrate/polycrate-operator/internal/version.Commit=${COMMIT} \
      -X github.com/polycrate/polycrate-operator/internal/version.BuildDate=${BUILD_DATE}" \
    -o /polycrate-operator ./cmd/polycrate-operator

FROM gcr.io/distroless/static:nonroot
COPY --from=builder /polycrate-operator /polycrate-operator
USER 65532:65532
ENTRYPOINT ["/polycrate-operator"]
CMD ["run"]
