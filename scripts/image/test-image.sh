#!/usr/bin/env bash
# Builds the Dockerfile at the root on a local stand-in for its base image
# (build-base.sh) and runs it as a platform team would, against PostgreSQL on
# the host:
#
#   1. `migrate --binding reference` into a fresh database;
#   2. `run --watch-config --http-port` on a read-only root filesystem, with the
#      configuration document mounted from a file and the webhook's API key in
#      the environment; GET /readyz must answer 200;
#   3. a row inserted into the reference schema's assets table must reach a
#      receiver on the host, with the API key;
#   4. the process must not run as root;
#   5. the image must hold no development dependency;
#   6. `asset-webhooks` must be on the image's PATH, and the OCI labels set.
#
# Every check runs; the script exits 1 if any failed. The database is dropped
# when every check passed, and kept (its name printed) when one failed.
#
# Environment: IMAGE_TEST_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres,
# a superuser connection used to create the test's database), IMAGE_TAG
# (default localhost/asset-webhooks:test), IMAGE_BUILT (1: IMAGE_TAG is built
# already), and build-image.sh's.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
. "$here/common.sh"
ensure_image_tools

container="asset-webhooks-image-test-$$"
image_test_frame "image test" asset_webhooks_image "$container"

# --- the image ----------------------------------------------------------------
# Built by build-image.sh (which also writes the SBOM), unless IMAGE_BUILT=1
# says IMAGE_TAG was built already (.ci/run builds once for every image test).
ensure_test_image
size="$(podman_ image ls --format '{{.Size}}' "$image" | head -1)"
echo "image test: $image (${size})"

# --- run against the host's PostgreSQL ---------------------------------------
started="$(now_seconds)"
in_image() {
  podman_ run --rm "${PODMAN_LIMITS[@]}" "$image" "$@"
}
free_port() {
  node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })'
}

psql "$admin_url" -qAtc "create database $database"
keep_database=1
in_image migrate --binding reference --database-url "$database_url"

node "$here/receiver.mjs" "$work/receiver.port" "$work/requests.jsonl" &
receiver_pid=$!
for _ in $(seq 50); do [ -s "$work/receiver.port" ] && break; sleep 0.1; done
receiver_port="$(cat "$work/receiver.port")"
http_port="$(free_port)"
api_key="image-test-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"

cat >"$work/webhooks.yaml" <<YAML
assetUpdater:
  intervalSeconds: 1
  network:
    allowPrivateAddresses: true
  webhooks:
    - id: image-test
      url: http://127.0.0.1:${receiver_port}/assets
      enabled: true
      apikey: image-test-key
YAML
chmod 0644 "$work/webhooks.yaml"

# --read-only: what Kubernetes' readOnlyRootFilesystem gives (podman still
# mounts a tmpfs on /tmp, as the manifests mount an emptyDir there).
podman_ run --detach --name "$container" "${PODMAN_LIMITS[@]}" --read-only \
  --env DATABASE_URL="$database_url" \
  --env ASSET_WEBHOOKS_SECRET_IMAGE_TEST_KEY="$api_key" \
  --volume "$work/webhooks.yaml:/config/webhooks.yaml:ro" \
  "$image" run --config /config/webhooks.yaml --watch-config --http-port "$http_port" >/dev/null

ready=""
for _ in $(seq 120); do
  ready="$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$http_port/readyz" || true)"
  [ "$ready" = 200 ] && break
  [ "$(podman_ inspect --format '{{.State.Running}}' "$container")" = true ] || break
  sleep 0.5
done
if [ "$ready" = 200 ]; then
  check "GET /readyz answered 200"
else
  fail "GET /readyz: expected 200 within 60 s, got ${ready:-no answer}"
fi
live="$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$http_port/livez" || true)"
[ "$live" = 200 ] && check "GET /livez answered 200" || fail "GET /livez: expected 200, got ${live:-no answer}"

asset_id="$(psql "$database_url" -qAtc "insert into assets (title) values ('image test') returning asset_id")"
delivered=""
for _ in $(seq 120); do
  if [ -s "$work/requests.jsonl" ]; then
    delivered="$(node -e '
      const [file, assetId, apiKey] = process.argv.slice(1);
      for (const line of require("fs").readFileSync(file, "utf8").split("\n").filter(Boolean)) {
        const request = JSON.parse(line);
        const body = JSON.parse(request.body);
        if (request.headers["x-api-key"] !== apiKey) { console.log("wrong X-API-Key"); process.exit(); }
        if (body.events.some((e) => String(e.assetId) === assetId && e.eventType === "CREATED")) { console.log("yes"); process.exit(); }
      }' "$work/requests.jsonl" "$asset_id" "$api_key")"
    [ -n "$delivered" ] && break
  fi
  sleep 0.5
done
if [ "$delivered" = yes ]; then
  check "the CREATED event of asset $asset_id reached the receiver on the host, with the API key"
else
  fail "expected the CREATED event of asset $asset_id at the receiver within 60 s, got ${delivered:-nothing}"
fi

uid="$(podman_ exec "$container" id -u || true)"
user="$(podman_ top "$container" user | awk 'NR == 2 { print $1 }' || true)"
if [ -n "$uid" ] && [ "$uid" != 0 ] && [ "$user" != root ]; then
  check "the process runs as uid $uid ($user), not root"
else
  fail "expected the process to run as a user other than root, got uid '${uid}' user '${user}'"
fi

# Stopped as an orchestrator stops it: SIGTERM, and exit 0 once in-flight work is done.
podman_ stop --time 30 "$container" >/dev/null
status="$(podman_ inspect --format '{{.State.ExitCode}}' "$container")"
[ "$status" = 0 ] && check "run exited 0 on SIGTERM" || fail "run on SIGTERM: expected exit 0, got $status"
if [ "$failures" -ne 0 ]; then
  echo "image test: the service's log:" >&2
  podman_ logs "$container" 2>&1 | tail -40 >&2
fi

podman_ run --rm "${PODMAN_LIMITS[@]}" --entrypoint cat "$image" /app/node_modules/.package-lock.json \
  >"$work/installed.json"
dev="$(node "$here/dev-dependencies.mjs" "$root/package-lock.json" "$work/installed.json" | tr '\n' ' ')"
if [ -z "$dev" ]; then
  check "the image holds no development dependency"
else
  fail "expected no development dependency in /app/node_modules, found: $dev"
fi

on_path="$(podman_ run --rm "${PODMAN_LIMITS[@]}" --entrypoint sh "$image" -c 'command -v asset-webhooks' || true)"
if [ -n "$on_path" ] && podman_ run --rm "${PODMAN_LIMITS[@]}" --entrypoint asset-webhooks "$image" --help >/dev/null; then
  check "asset-webhooks is on the image's PATH ($on_path)"
else
  fail "expected asset-webhooks on the image's PATH, got '${on_path}'"
fi
labels="$(podman_ image inspect --format '{{ index .Labels "org.opencontainers.image.version" }} {{ index .Labels "org.opencontainers.image.revision" }}' "$image")"
expected_version="$(node -p 'require(process.argv[1]).version' "$root/package.json")"
case "$labels" in
  "$expected_version "?*) check "OCI labels: version and revision $labels" ;;
  *) fail "expected the OCI labels version $expected_version and a revision, got '$labels'" ;;
esac
test_seconds="$(seconds_since "$started")"

echo "image test: image build ${build_seconds} s, test ${test_seconds} s; image size ${size}"
image_test_end
