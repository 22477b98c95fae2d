#!/usr/bin/env bash
# Applies deploy/kubernetes as a kubelet would, with podman, in the image built
# from the Dockerfile, against PostgreSQL on the host, after only the edits
# docs/operations.md ("First deploy") documents, made the way it says: an
# overlay that sets the image, the Secrets' values, the document, the binding
# and the database's address. Then, from the rendered Deployment's pod spec
# (scripts/kubernetes/pod-to-podman.mjs: user and groups, read-only root
# filesystem, capabilities, env from the Secret, ConfigMap and Secret volumes
# in the kubelet's `..data` layout, emptyDir as tmpfs, command and args):
#
#   1. the migration init container runs twice (a pod start, then a re-apply),
#      and succeeds both times;
#   2. the run container answers 200 on its readiness probe's path and port;
#   3. a row inserted into the reference binding's assets table reaches a
#      receiver on the host's loopback with the Secret's API key in X-API-Key
#      and a User-Agent header;
#   4. the key, rotated in the Secret volume as the kubelet rotates it (a new
#      timestamped directory, `..data` swapped atomically), is sent with the
#      next delivery, without a restart;
#   5. `asset-webhooks explain` runs inside the container with no --config;
#   6. SIGTERM (podman stop) ends the container with exit 0.
#
# The host's network is the pod's: the receiver listens on 127.0.0.1, and the
# probe port is the manifest's own (9464), which must be free.
#
# Every check runs; the script exits 1 if any failed. The database is dropped
# when every check passed, and kept (its name printed) when one failed.
#
# Environment: IMAGE_TEST_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres,
# a superuser connection used to create the test's database), IMAGE_TAG
# (default localhost/asset-webhooks:test), IMAGE_BUILT (1: IMAGE_TAG is built
# already; else build-image.sh builds it), and build-image.sh's.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
. "$here/common.sh"
ensure_image_tools
command -v kubectl >/dev/null || { echo "kubernetes test: expected kubectl on PATH (kubectl kustomize renders the manifests)" >&2; exit 1; }

pod="asset-webhooks-kubernetes-test-$$"
translate="$root/scripts/kubernetes/pod-to-podman.mjs"
image_test_frame "kubernetes test" asset_webhooks_kubernetes "$pod-run" "$pod-migrate"
random_key() { echo "$1-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"; }

ensure_test_image
started="$(now_seconds)"

# --- the documented edits, as an overlay ---------------------------------------
node "$here/receiver.mjs" "$work/receiver.port" "$work/requests.jsonl" &
receiver_pid=$!
for _ in $(seq 50); do [ -s "$work/receiver.port" ] && break; sleep 0.1; done
receiver_port="$(cat "$work/receiver.port")"
first_key="$(random_key first)"
second_key="$(random_key second)"

overlay="$work/overlay"
mkdir -p "$overlay"
# kustomize takes a base only by a relative path, as an overlay in your own repository names it.
base="$(realpath --relative-to="$overlay" "$root/deploy/kubernetes")"
cp "$root/sql/bindings/reference.sql" "$overlay/binding.sql"
cat >"$overlay/kustomization.yaml" <<YAML
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - $base
images:
  # The base has set its own placeholder already: an overlay names that one.
  - name: registry.example.com/asset-webhooks
    newName: ${image%:*}
    newTag: ${image##*:}
configMapGenerator:
  - name: asset-webhooks-binding
    behavior: replace
    files:
      - binding.sql
patches:
  - patch: |-
      apiVersion: v1
      kind: Secret
      metadata:
        name: asset-webhooks
      stringData:
        DATABASE_URL: $database_url
  - patch: |-
      apiVersion: v1
      kind: Secret
      metadata:
        name: asset-webhooks-api-keys
      stringData:
        crm-api-key: $first_key
  - patch: |-
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: asset-webhooks
      data:
        webhooks.yaml: |
          assetUpdater:
            intervalSeconds: 1
            network:
              allowPrivateAddresses: true
            secrets:
              provider: file
              directory: /run/secrets/asset-webhooks
              cacheSeconds: 10
            webhooks:
              - id: crm
                url: http://127.0.0.1:${receiver_port}/assets
                enabled: true
                apikey: crm-api-key
  - target:
      kind: NetworkPolicy
      name: asset-webhooks
    patch: |-
      - op: replace
        path: /spec/egress/1/to/0/ipBlock/cidr
        value: 127.0.0.1/32
YAML
kubectl kustomize "$overlay" >"$work/rendered.yaml"
node "$translate" volumes "$work/rendered.yaml" "$work"

run_args() {
  local -n into="$1"
  mapfile -d '' into < <(node "$translate" args "$work/rendered.yaml" "$work" "$2")
  [ "${#into[@]}" -gt 0 ]
}

# --- 1. the init container, twice ----------------------------------------------
psql "$admin_url" -qAtc "create database $database"
keep_database=1
run_args migrate_args migrate
for attempt in "a pod's start" "a re-apply"; do
  if podman_ run --rm --name "$pod-migrate" "${PODMAN_LIMITS[@]}" "${migrate_args[@]}" >"$work/migrate.log" 2>&1; then
    check "the init container migrate succeeded ($attempt): $(tail -1 "$work/migrate.log")"
  else
    fail "the init container migrate ($attempt): expected exit 0, got: $(tail -5 "$work/migrate.log")"
  fi
done

# --- 2. run, ready --------------------------------------------------------------
read -r probe_path probe_port < <(node "$translate" probe "$work/rendered.yaml" run readiness)
if curl -s -o /dev/null "http://127.0.0.1:$probe_port/"; then
  echo "kubernetes test: port $probe_port (the manifest's probe port) is taken on this host: cannot run the pod" >&2
  exit 1
fi
run_args run_container_args run
podman_ run --detach --name "$pod-run" "${PODMAN_LIMITS[@]}" "${run_container_args[@]}" >/dev/null
started_at="$(podman_ inspect --format '{{.State.StartedAt}}' "$pod-run")"

ready=""
for _ in $(seq 120); do
  ready="$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$probe_port$probe_path" || true)"
  [ "$ready" = 200 ] && break
  [ "$(podman_ inspect --format '{{.State.Running}}' "$pod-run")" = true ] || break
  sleep 0.5
done
if [ "$ready" = 200 ]; then
  check "the readiness probe GET $probe_path on port $probe_port answered 200"
else
  fail "the readiness probe GET $probe_path on port $probe_port: expected 200 within 60 s, got ${ready:-no answer}"
fi

# --- 3. and 4. deliveries, before and after a key rotation ---------------------
# Waits until the CREATED of asset $1 has arrived; prints the X-API-Key and the
# User-Agent it came with, or nothing.
delivery_of() {
  local found=""
  for _ in $(seq "$2"); do
    if [ -s "$work/requests.jsonl" ]; then
      found="$(node -e '
        const [file, assetId] = process.argv.slice(1);
        for (const line of require("fs").readFileSync(file, "utf8").split("\n").filter(Boolean)) {
          const request = JSON.parse(line);
          const events = JSON.parse(request.body).events ?? [];
          if (events.some((e) => String(e.assetId) === assetId && e.eventType === "CREATED"))
            console.log(JSON.stringify({ key: request.headers["x-api-key"] ?? null, agent: request.headers["user-agent"] ?? null }));
        }' "$work/requests.jsonl" "$1" | tail -1)"
      [ -n "$found" ] && break
    fi
    sleep 0.5
  done
  echo "$found"
}
field() { node -p 'JSON.parse(process.argv[1])[process.argv[2]] ?? ""' "$1" "$2"; }

asset_id="$(psql "$database_url" -qAtc "insert into assets (title) values ('kubernetes test') returning asset_id")"
delivered="$(delivery_of "$asset_id" 120)"
if [ -z "$delivered" ]; then
  fail "expected the CREATED event of asset $asset_id at the receiver within 60 s, got nothing"
elif [ "$(field "$delivered" key)" = "$first_key" ]; then
  check "asset $asset_id's CREATED reached the receiver on the host with the Secret's API key"
else
  fail "asset $asset_id's CREATED: expected X-API-Key from the Secret, got another value"
fi
agent="$([ -n "$delivered" ] && field "$delivered" agent || true)"
if [ -n "$agent" ]; then
  check "the delivery carried User-Agent: $agent"
else
  fail "expected a User-Agent header on the delivery, got none"
fi

rotated="$(now_seconds)"
node "$translate" update "$work/rendered.yaml" "$work" api-keys crm-api-key "$second_key"
# The key is cached for cacheSeconds (10): deliveries of the next seconds may still carry the old one.
rotated_delivery=""
for round in $(seq 12); do
  asset_id="$(psql "$database_url" -qAtc "insert into assets (title) values ('after rotation $round') returning asset_id")"
  delivered="$(delivery_of "$asset_id" 20)"
  if [ -n "$delivered" ] && [ "$(field "$delivered" key)" = "$second_key" ]; then
    rotated_delivery="$asset_id"
    break
  fi
  sleep 2
done
if [ -n "$rotated_delivery" ]; then
  check "after the kubelet-style rotation, asset $rotated_delivery's CREATED carried the new key ($(seconds_since "$rotated") s after the swap)"
else
  fail "expected a delivery with the rotated key within about 60 s of the ..data swap, got none"
fi
if [ "$(podman_ inspect --format '{{.State.StartedAt}} {{.RestartCount}}' "$pod-run")" = "$started_at 0" ]; then
  check "the rotation needed no restart"
else
  fail "expected the container to keep running from $started_at, got a restart"
fi

# --- 5. a command in the pod ----------------------------------------------------
if podman_ exec "$pod-run" asset-webhooks explain --webhook crm --asset "$asset_id" >"$work/explain.out" 2>&1; then
  check "podman exec ... asset-webhooks explain --webhook crm --asset $asset_id, without --config: $(head -1 "$work/explain.out")"
else
  fail "podman exec ... asset-webhooks explain without --config: expected exit 0, got: $(head -3 "$work/explain.out")"
fi

# --- 6. SIGTERM -----------------------------------------------------------------
grace="$(node "$translate" grace "$work/rendered.yaml")"
podman_ stop --time "$grace" "$pod-run" >/dev/null
status="$(podman_ inspect --format '{{.State.ExitCode}}' "$pod-run")"
[ "$status" = 0 ] && check "run exited 0 on SIGTERM" || fail "run on SIGTERM: expected exit 0, got $status"
if [ "$failures" -ne 0 ]; then
  echo "kubernetes test: the service's log:" >&2
  podman_ logs "$pod-run" 2>&1 | tail -40 >&2
fi
test_seconds="$(seconds_since "$started")"

echo "kubernetes test: image ${build_seconds} s, test ${test_seconds} s"
image_test_end
