# syntax=docker/dockerfile:1
# sockpressure exporter image: build on Debian bookworm, run on bookworm-slim
# with only the shared libraries the binary links (see the runtime stage).
#
#   docker build -t ghcr.io/sockpressure/sockpressure-exporter:0.1.0 .
#
# The BPF objects are compiled against the kernel types declared in
# bpf/sp_core.h (no vmlinux.h), so the build host needs no BTF; CO-RE
# relocates them on the target kernel using *its* BTF. --build-arg BPF=OFF
# builds an agent without the eBPF tiers (procfs/cgroupfs/sock_diag only).

FROM debian:bookworm AS build
ARG BPF=ON
# The -dev set from docs/build-notes.md §1 plus the toolchain.
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      build-essential cmake pkg-config git ca-certificates \
      clang llvm bpftool libbpf-dev libelf-dev zlib1g-dev \
      prometheus-cpp-dev libcpp-httplib-dev libabsl-dev libyaml-cpp-dev \
      libprotobuf-dev protobuf-compiler python3 \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# Tests are built and run in CI, not in the image build.
RUN cmake -S . -B /build -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF -DSOCKPRESSURE_BPF=${BPF} \
 && cmake --build /build -j"$(nproc)" --target sockpressure_exporter \
 && strip /build/sockpressure_exporter

FROM debian:bookworm-slim
# Runtime libraries only, i.e. the packages owning what `ldd
# sockpressure_exporter` resolves to (tests/monitoring/test_deploy.py checks
# this list against the locally built binary):
#   prometheus-cpp core, cpp-httplib (compiled library on Debian, pulls
#   libssl3/libbrotli1), abseil, protobuf, libbpf (+libelf1, zlib1g), and
#   libcrypt1 (crypt() for --web.config.file password hashes; only priority
#   "optional", so not guaranteed in -slim), libssl3 (libcrypto for the
#   kubelet client's TLS), libyaml-cpp0.7 (--web.config.file's parser).
#   libc6/libgcc-s1/libstdc++6 are in the base image.
#   ca-certificates: the system roots for https Alertmanagers with a public
#   certificate (--alertmanager.ca-file is only needed for a private CA).
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      libprometheus-cpp-core1.0 libcpp-httplib0.11 libabsl20220623 libprotobuf32 \
      libbpf1 libelf1 zlib1g libcrypt1 libssl3 libyaml-cpp0.7 ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /build/sockpressure_exporter /usr/bin/sockpressure_exporter
# Non-root by default: a plain `docker run` gets the memory.stat and procfs
# tiers, which only read world-readable files. The eBPF and sock_diag tiers
# need capabilities; the Kubernetes DaemonSet runs it as uid 0 with every
# capability dropped except the few it adds (Kubernetes has no ambient
# capabilities, and file capabilities would require allowPrivilegeEscalation).
USER 65534:65534
EXPOSE 19100
ENTRYPOINT ["/usr/bin/sockpressure_exporter"]
CMD ["--web.listen-address=:19100"]
