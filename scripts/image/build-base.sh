#!/usr/bin/env bash
# Builds a local stand-in for the official node:<major>-slim image and prints
# its name on stdout (progress goes to stderr). For machines that reach the npm
# registry and the Debian mirror but no container registry.
#
# Reused when an image of the same Node.js version, CA bundle and
# base.Containerfile exists, so a second run only asks the registry which
# version is current. The Debian root
# filesystem is reused too (asset-webhooks-debian:bookworm-minbase); remove
# that image to take a fresh one.
#
# Environment: NODE_MAJOR (default 24), NODE_VERSION (default: the newest
# NODE_MAJOR.x on the registry), NPM_MAJOR (default 11, the line Node.js 24
# bundles), CA_BUNDLE (default: npm's cafile, else the system bundle).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/common.sh"
ensure_image_tools

node_major="${NODE_MAJOR:-24}"
npm_major="${NPM_MAJOR:-11}"
debian_image=localhost/asset-webhooks-debian:bookworm-minbase
case "$(uname -m)" in
  x86_64) node_arch=x64 ;;
  aarch64) node_arch=arm64 ;;
  *) echo "build-base: expected an x86_64 or aarch64 machine, got $(uname -m)" >&2; exit 1 ;;
esac

# The newest version of PACKAGE within RANGE on the registry.
newest() {
  npm view "$1@$2" version --json |
    node -e 'const v = [].concat(JSON.parse(require("fs").readFileSync(0, "utf8")));
      const key = (s) => s.split(".").map(Number);
      v.sort((a, b) => { const [x, y] = [key(a), key(b)]; return x[0] - y[0] || x[1] - y[1] || x[2] - y[2]; });
      if (!v.length) process.exit(1);
      console.log(v.at(-1));'
}

# The binary of the `node` package: `node@V` installs `node-<platform>-<arch>@V`,
# which holds the official build's bin/node.
node_package="node-linux-${node_arch}"
node_version="${NODE_VERSION:-}"
if [ -z "$node_version" ] && ! node_version="$(newest "$node_package" ">=${node_major} <$((node_major + 1))")"; then
  # Without the registry no stand-in can be built, but a cached one still serves.
  cached="$(podman_ images --format '{{.Tag}}' localhost/asset-webhooks-node | grep "^${node_major}\." | sort -V | tail -1 || true)"
  if [ -z "$cached" ]; then
    echo "build-base: expected the npm registry to name the newest Node.js ${node_major}.x, got no answer, and no stand-in is cached" >&2
    exit 1
  fi
  node_version="${cached%%-*}"
  echo "build-base: the npm registry did not answer: using the cached stand-in of Node.js $node_version" >&2
fi
tag="localhost/asset-webhooks-node:${node_version}-bookworm-minbase"

ca_bundle="${CA_BUNDLE:-$(npm config get cafile 2>/dev/null || true)}"
case "$ca_bundle" in "" | null | undefined) ca_bundle=/etc/ssl/certs/ca-certificates.crt ;; esac
if [ ! -f "$ca_bundle" ]; then
  echo "build-base: expected a CA bundle at $ca_bundle (npm's cafile or the system bundle), found none" >&2
  exit 1
fi
# What the image is made of besides Node.js: a change to either builds it again.
base_key="$(cat "$ca_bundle" "$here/base.Containerfile" | sha256sum | cut -d' ' -f1)"

if podman_ image exists "$tag" &&
  [ "$(podman_ image inspect --format '{{ index .Labels "org.asset-webhooks.base.key" }}' "$tag")" = "$base_key" ]; then
  echo "build-base: reusing $tag" >&2
  echo "$tag"
  exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

if ! podman_ image exists "$debian_image"; then
  echo "build-base: Debian bookworm minbase root filesystem (mmdebstrap)" >&2
  mmdebstrap --variant=minbase --quiet bookworm "$work/rootfs.tar" >&2
  podman_ import --quiet "$work/rootfs.tar" "$debian_image" >/dev/null
  rm -f "$work/rootfs.tar"
fi

echo "build-base: Node.js $node_version and npm $npm_major.x from the npm registry" >&2
context="$work/context"
mkdir -p "$context/npm"
(cd "$work" && npm pack --silent "$node_package@$node_version" >/dev/null)
tar -xzf "$work/$node_package-$node_version.tgz" -C "$work" package/bin/node
mv "$work/package/bin/node" "$context/node"
npm_version="$(newest npm "^$npm_major")"
(cd "$work" && npm pack --silent "npm@$npm_version" >/dev/null)
tar -xzf "$work/npm-$npm_version.tgz" -C "$context/npm" --strip-components=1
cp "$ca_bundle" "$context/ca-bundle.crt"

podman_ build "${PODMAN_LIMITS[@]}" --quiet \
  --build-arg DEBIAN_IMAGE="$debian_image" \
  --build-arg NODE_VERSION="$node_version" \
  --build-arg NPM_VERSION="$npm_version" \
  --build-arg BASE_KEY="$base_key" \
  --file "$here/base.Containerfile" --tag "$tag" "$context" >/dev/null
echo "build-base: built $tag" >&2
echo "$tag"
