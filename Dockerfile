# The asset-webhooks CLI on the official Node.js image. Build and run:
#
#   docker build -t asset-webhooks \
#     --build-arg VERSION="$(node -p 'require("./package.json").version')" \
#     --build-arg REVISION="$(git rev-parse HEAD)" .
#   docker run --rm -e DATABASE_URL=postgres://… asset-webhooks migrate --binding FILE
#   docker run -e DATABASE_URL=… -v ./webhooks.yaml:/config/webhooks.yaml:ro -p 9464:9464 \
#     asset-webhooks run --config /config/webhooks.yaml --http-port 9464
#
# NODE_IMAGE names the base of the build stages: a mirror or a hardened image
# with the same layout (node and npm on PATH, a `node` user) can stand in for
# it. RUNTIME_IMAGE names the base of the final stage (default: NODE_IMAGE): it
# needs only node, a `node` user (uid 1000) and, for the `asset-webhooks`
# command on PATH, /usr/bin/env and /usr/local/bin on PATH, so a slimmer or
# hardened runtime image goes there without a fork of this file. npm is not used
# at run time. VERSION, REVISION and SOURCE fill the OCI labels
# (scripts/image/build-image.sh passes them).
ARG NODE_IMAGE=node:24-slim
ARG RUNTIME_IMAGE=${NODE_IMAGE}

# Compiles src/ to dist/. Scripts are skipped: `prepare` would build before the
# sources are copied, and no dependency's install script is needed to compile.
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build \
 && mkdir /app/path \
 && ln -s /app/bin/asset-webhooks.js /app/path/asset-webhooks

# The production install: what `run` needs and nothing else. In a stage of its
# own so that npm's cache and logs stay out of the image. `prepare` would call
# the compiler, which a production install does not have.
# --omit=optional too: TypeScript is an optional peer of cosmiconfig (which
# graphile-worker loads its configuration with), so the lockfile marks it
# devOptional and --omit=dev alone keeps the compiler. The production tree's
# other optional packages are fallbacks this image does not need (pg's for
# Cloudflare Workers, a parseArgs polyfill for Node.js before 18.3).
FROM ${NODE_IMAGE} AS production-dependencies
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --omit=optional --ignore-scripts --no-audit --no-fund

FROM ${RUNTIME_IMAGE}
ARG VERSION=""
ARG REVISION=""
ARG SOURCE=""
LABEL org.opencontainers.image.title=asset-webhooks \
      org.opencontainers.image.description="Outbound webhooks for a DAM's asset changes, from a transactional outbox in its PostgreSQL database" \
      org.opencontainers.image.version=${VERSION} \
      org.opencontainers.image.revision=${REVISION} \
      org.opencontainers.image.source=${SOURCE}
ENV NODE_ENV=production
WORKDIR /app
# Owned by root and read-only to the `node` user the process runs as: the
# service writes nothing to disk, so the root filesystem may be mounted read-only.
COPY package.json ./
COPY --from=production-dependencies /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY bin ./bin
COPY sql ./sql
# `asset-webhooks COMMAND` in the container (`kubectl exec POD -- asset-webhooks
# explain ...`): a symbolic link to the CLI, whose first line runs node.
COPY --from=build /app/path/ /usr/local/bin/
USER node
# The conventional port for `run --http-port` (GET /livez, /readyz, /metrics).
EXPOSE 9464
ENTRYPOINT ["node", "/app/bin/asset-webhooks.js"]
CMD ["--help"]
