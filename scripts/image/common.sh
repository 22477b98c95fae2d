# Sourced by the scripts beside it: podman as this kind of machine needs it.
#
# - runc: crun fails on kernels with hybrid cgroups (v1 and v2 mounted together).
# - Lower ulimits: podman's defaults raise nofile and nproc, which needs
#   CAP_SYS_RESOURCE, and sandboxes often do not grant it.
# - Host networking: no bridge or slirp needed, and the container reaches
#   PostgreSQL and the receiver on the host's 127.0.0.1.

# Installs podman, runc and mmdebstrap from the distribution when one is missing.
ensure_image_tools() {
  local missing=()
  for tool in podman runc mmdebstrap; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "image: ${missing[*]} missing; expected them installed (apt-get install podman runc mmdebstrap as root)" >&2
    return 1
  fi
  echo "image: installing podman runc mmdebstrap (missing: ${missing[*]})" >&2
  DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc mmdebstrap >&2
}

podman_() {
  podman --runtime runc "$@"
}

# Options every build and run takes.
PODMAN_LIMITS=(--ulimit nofile=10000:10000 --ulimit nproc=1000:1000 --network host)

now_seconds() {
  date +%s.%N
}

# Seconds since a now_seconds value, to one decimal.
seconds_since() {
  awk -v start="$1" -v end="$(now_seconds)" 'BEGIN { printf "%.1f", end - start }'
}
