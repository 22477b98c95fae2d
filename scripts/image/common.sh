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

# --- the frame every image test shares ----------------------------------------
# `image_test_frame NAME DATABASE_PREFIX CONTAINER...` sets admin_url, image,
# database, database_url and work; defines check, fail and image_test_end;
# and removes the containers, the receiver (receiver_pid), the work directory
# and the database when the script exits, unless keep_database is 1 (set it
# once the database exists; image_test_end clears it when every check passed).
# Environment: IMAGE_TEST_DATABASE_URL (default
# postgres://postgres@127.0.0.1:5432/postgres, a superuser connection used to
# create the test's database) and IMAGE_TAG (default localhost/asset-webhooks:test).
image_test_frame() {
  test_name="$1"
  admin_url="${IMAGE_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
  image="${IMAGE_TAG:-localhost/asset-webhooks:test}"
  database="$2_$(date +%s)_$$"
  database_url="${admin_url%/*}/$database"
  test_containers=("${@:3}")
  work="$(mktemp -d)"
  receiver_pid=""
  failures=0
  keep_database=0
  trap image_test_cleanup EXIT
}

image_test_cleanup() {
  podman_ rm --force --ignore --time 5 "${test_containers[@]}" >/dev/null 2>&1 || true
  [ -n "$receiver_pid" ] && kill "$receiver_pid" 2>/dev/null || true
  if [ "$keep_database" -eq 0 ]; then
    psql "$admin_url" -qAtc "drop database if exists $database" >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}

check() { echo "$test_name: ok: $*"; }
fail() {
  echo "$test_name: FAILED: $*" >&2
  failures=$((failures + 1))
}

# Builds IMAGE_TAG with build-image.sh (which also writes the SBOM), unless
# IMAGE_BUILT=1 says it is built already (.ci/run builds once for every image
# test); sets build_seconds.
ensure_test_image() {
  local started
  started="$(now_seconds)"
  if [ "${IMAGE_BUILT:-0}" != 1 ]; then
    IMAGE_TAG="$image" "$here/build-image.sh" >/dev/null
  fi
  build_seconds="$(seconds_since "$started")"
}

# Ends the script: exit 1 with the database kept when a check failed.
image_test_end() {
  if [ "$failures" -ne 0 ]; then
    echo "$test_name: $failures check(s) failed; database $database kept for inspection" >&2
    exit 1
  fi
  keep_database=0
  echo "$test_name: passed"
}
