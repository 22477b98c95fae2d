#!/usr/bin/env bash
# Builds the Dockerfile at the root on a local stand-in for its base image
# (build-base.sh), with the OCI labels' build arguments (version from
# package.json, revision from git, source from git's origin), and writes next
# to it, in OUTPUT_DIR:
#
#   sbom.cdx.json  the CycloneDX SBOM of the image's production install
#                  (`npm sbom` from package-lock.json, with the Dockerfile's
#                  --omit=dev --omit=optional);
#   image.txt      the image's name, id, size and labels.
#
# Prints the image's name on stdout; progress, the image's size and the SBOM's
# component count on stderr.
#
# Environment: IMAGE_TAG (default localhost/asset-webhooks:test), OUTPUT_DIR
# (default .tmp/image at the root), and build-base.sh's.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
. "$here/common.sh"
ensure_image_tools

image="${IMAGE_TAG:-localhost/asset-webhooks:test}"
output="${OUTPUT_DIR:-$root/.tmp/image}"
mkdir -p "$output"

started="$(now_seconds)"
base="$("$here/build-base.sh")"
base_seconds="$(seconds_since "$started")"

version="$(node -p 'require(process.argv[1]).version' "$root/package.json")"
revision="$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)"
# A build of uncommitted changes says so: its revision alone would name other code.
if [ "$revision" != unknown ] && [ -n "$(git -C "$root" status --porcelain 2>/dev/null)" ]; then
  revision="$revision-dirty"
fi
source_url="$(git -C "$root" remote get-url origin 2>/dev/null || true)"

started="$(now_seconds)"
podman_ build "${PODMAN_LIMITS[@]}" --quiet \
  --build-arg NODE_IMAGE="$base" \
  --build-arg VERSION="$version" \
  --build-arg REVISION="$revision" \
  --build-arg SOURCE="$source_url" \
  --tag "$image" "$root" >/dev/null
build_seconds="$(seconds_since "$started")"
size="$(podman_ image ls --format '{{.Size}}' "$image" | head -1)"
bytes="$(podman_ image inspect --format '{{.Size}}' "$image")"

(cd "$root" && npm sbom --sbom-format cyclonedx --omit dev --omit optional --package-lock-only) >"$output/sbom.cdx.json"
components="$(node -p 'JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).components.length' "$output/sbom.cdx.json")"
{
  echo "image: $image"
  echo "id: $(podman_ image inspect --format '{{.Id}}' "$image")"
  echo "base: $base"
  echo "size: $size ($bytes bytes)"
  podman_ image inspect --format '{{range $k, $v := .Labels}}{{printf "label: %s=%s\n" $k $v}}{{end}}' "$image"
} >"$output/image.txt"

echo "build-image: built $image on $base: size $size ($bytes bytes); base ${base_seconds} s, image ${build_seconds} s" >&2
echo "build-image: SBOM $output/sbom.cdx.json: $components components (CycloneDX, production install)" >&2
echo "$image"
