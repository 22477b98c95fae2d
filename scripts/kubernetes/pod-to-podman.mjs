// Runs the pod of a rendered Deployment the way a kubelet would, with podman,
// for scripts/image/test-kubernetes.sh. Reads the output of `kubectl kustomize`
// (every object of the apply), finds the one Deployment, and:
//
//   volumes RENDERED WORKDIR
//       writes each ConfigMap and Secret volume of the pod spec under
//       WORKDIR/volumes/NAME in the kubelet's layout: the keys in a
//       timestamped directory `..2026_01_02_03_04_05.123456789`, a symbolic
//       link `..data` to it, and for each key a link KEY -> ..data/KEY; files
//       mode defaultMode (0644 unless given), owned by root and, with the
//       pod's fsGroup, that group.
//   update RENDERED WORKDIR VOLUME KEY VALUE
//       changes one key of a written volume as the kubelet's atomic writer
//       does: a new timestamped directory with every key, a link `..data_tmp`
//       to it renamed over `..data` (one atomic step), the old directory removed.
//   args RENDERED WORKDIR CONTAINER
//       prints, NUL-separated, the arguments of `podman run` for the init
//       container or container CONTAINER: user and groups, read-only root
//       filesystem, capabilities and no-new-privileges from the security
//       contexts; the environment (value, secretKeyRef, configMapKeyRef); the
//       volume mounts (ConfigMap and Secret volumes from WORKDIR, emptyDir as a
//       tmpfs of its sizeLimit); then the image, the command and the args.
//   probe RENDERED CONTAINER KIND
//       prints the path and the port (a named port resolved) of the
//       container's KIND probe (readiness, liveness or startup), httpGet only.
//   grace RENDERED
//       prints the pod's terminationGracePeriodSeconds (30 unless given).
//
// Networking is the caller's (test-kubernetes.sh runs with the host's). What
// the pod spec holds that this cannot do (items of a volume, other volume
// types or env sources, a probe that is not httpGet) stops it with a message:
// the test would otherwise pass on a pod the kubelet runs differently.
import {
  chmodSync,
  chownSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';

const [command, renderedFile, ...rest] = process.argv.slice(2);
const usage = () => {
  process.stderr.write(
    'usage: node pod-to-podman.mjs volumes RENDERED WORKDIR\n' +
      '       node pod-to-podman.mjs update RENDERED WORKDIR VOLUME KEY VALUE\n' +
      '       node pod-to-podman.mjs args RENDERED WORKDIR CONTAINER\n' +
      '       node pod-to-podman.mjs probe RENDERED CONTAINER readiness|liveness|startup\n' +
      '       node pod-to-podman.mjs grace RENDERED\n',
  );
  process.exit(2);
};
if (!command || !renderedFile) usage();

const fail = (message) => {
  process.stderr.write(`pod-to-podman: ${message}\n`);
  process.exit(1);
};

const objects = parseAllDocuments(readFileSync(renderedFile, 'utf8')).map((document) => {
  if (document.errors.length) fail(`${renderedFile}: ${document.errors[0].message}`);
  return document.toJS();
});
const deployments = objects.filter((object) => object?.kind === 'Deployment');
if (deployments.length !== 1) fail(`expected one Deployment in ${renderedFile}, got ${deployments.length}`);
const pod = deployments[0].spec.template.spec;
const fsGroup = pod.securityContext?.fsGroup;

function object(kind, name) {
  const found = objects.find((candidate) => candidate?.kind === kind && candidate.metadata?.name === name);
  if (!found) fail(`expected a ${kind} named ${name} in ${renderedFile} (the pod spec refers to it), got none`);
  return found;
}

/** A ConfigMap's or Secret's keys and their bytes. */
function keysOf(kind, name) {
  const source = object(kind, name);
  const keys = new Map();
  for (const [key, value] of Object.entries(source.data ?? {}))
    keys.set(key, kind === 'Secret' ? Buffer.from(value, 'base64') : Buffer.from(value, 'utf8'));
  for (const [key, value] of Object.entries(source.binaryData ?? {})) keys.set(key, Buffer.from(value, 'base64'));
  // The API server folds stringData into data, stringData winning.
  if (kind === 'Secret')
    for (const [key, value] of Object.entries(source.stringData ?? {})) keys.set(key, Buffer.from(value, 'utf8'));
  return keys;
}

/** The pod's volume NAME as [kind, object name, mode], for ConfigMap and Secret volumes. */
function projected(volume) {
  if (volume.configMap)
    return ['ConfigMap', volume.configMap.name, volume.configMap.defaultMode ?? 0o644, volume.configMap.items];
  if (volume.secret)
    return ['Secret', volume.secret.secretName, volume.secret.defaultMode ?? 0o644, volume.secret.items];
  return undefined;
}

function volumeNamed(name) {
  const volume = (pod.volumes ?? []).find((candidate) => candidate.name === name);
  if (!volume) fail(`expected a volume named ${name} in the pod spec, got none`);
  return volume;
}

/** The kubelet's name for a payload directory: `..` and the time to the nanosecond. */
function timestampedName() {
  const now = new Date();
  const pad = (n, width = 2) => String(n).padStart(width, '0');
  const nanos = pad(now.getUTCMilliseconds(), 3) + String(process.hrtime.bigint() % 1_000_000n).padStart(6, '0');
  return `..${now.getUTCFullYear()}_${pad(now.getUTCMonth() + 1)}_${pad(now.getUTCDate())}_${pad(now.getUTCHours())}_${pad(now.getUTCMinutes())}_${pad(now.getUTCSeconds())}.${nanos}`;
}

/** Writes `keys` into a new timestamped directory of `directory` and points ..data at it atomically. */
function writePayload(directory, keys, mode) {
  const payload = timestampedName();
  const payloadPath = path.join(directory, payload);
  mkdirSync(payloadPath, { mode: 0o755 });
  if (fsGroup !== undefined) chownSync(payloadPath, 0, fsGroup);
  for (const [key, bytes] of keys) {
    const file = path.join(payloadPath, key);
    writeFileSync(file, bytes);
    chmodSync(file, mode);
    if (fsGroup !== undefined) chownSync(file, 0, fsGroup);
  }
  const previous = readdirSync(directory).filter((entry) => entry.startsWith('..2') && entry !== payload);
  // The atomic step: a reader sees the old payload or the new one, never a mix.
  const temporary = path.join(directory, '..data_tmp');
  rmSync(temporary, { force: true });
  symlinkSync(payload, temporary);
  renameSync(temporary, path.join(directory, '..data'));
  for (const key of keys.keys()) {
    const link = path.join(directory, key);
    rmSync(link, { force: true });
    symlinkSync(path.posix.join('..data', key), link);
  }
  for (const entry of previous) rmSync(path.join(directory, entry), { recursive: true, force: true });
}

const volumeDirectory = (workdir, name) => path.join(workdir, 'volumes', name);

function writeVolumes(workdir) {
  for (const volume of pod.volumes ?? []) {
    const source = projected(volume);
    if (!source) continue;
    const [kind, name, mode, items] = source;
    if (items) fail(`volume ${volume.name}: items are not reproduced here; mount the whole ${kind}`);
    const directory = volumeDirectory(workdir, volume.name);
    mkdirSync(directory, { recursive: true, mode: 0o755 });
    chmodSync(directory, fsGroup === undefined ? 0o755 : 0o2755);
    if (fsGroup !== undefined) chownSync(directory, 0, fsGroup);
    writePayload(directory, keysOf(kind, name), mode);
  }
}

function updateVolume(workdir, name, key, value) {
  const volume = volumeNamed(name);
  const source = projected(volume);
  if (!source) fail(`volume ${name}: expected a ConfigMap or Secret volume`);
  const directory = volumeDirectory(workdir, name);
  const current = path.join(directory, '..data');
  const keys = new Map(readdirSync(current).map((entry) => [entry, readFileSync(path.join(current, entry))]));
  keys.set(key, Buffer.from(value, 'utf8'));
  writePayload(directory, keys, source[2]);
}

function containerNamed(name) {
  const container = [...(pod.initContainers ?? []), ...pod.containers].find((candidate) => candidate.name === name);
  if (!container) fail(`expected a container or init container named ${name}, got none`);
  return container;
}

function envValue(variable) {
  if ('value' in variable) return String(variable.value ?? '');
  const from = variable.valueFrom ?? {};
  const ref = from.secretKeyRef ?? from.configMapKeyRef;
  if (!ref) fail(`env ${variable.name}: only value, secretKeyRef and configMapKeyRef are reproduced here`);
  const keys = keysOf(from.secretKeyRef ? 'Secret' : 'ConfigMap', ref.name);
  if (!keys.has(ref.key))
    fail(`env ${variable.name}: expected key ${ref.key} in ${ref.name}, got ${[...keys.keys()].join(', ')}`);
  return keys.get(ref.key).toString('utf8');
}

function runArgs(workdir, name) {
  const container = containerNamed(name);
  const security = { ...pod.securityContext, ...container.securityContext };
  const args = [];
  if (security.runAsUser !== undefined) args.push('--user', `${security.runAsUser}:${security.runAsGroup ?? 0}`);
  // The kubelet adds fsGroup to every container's supplementary groups.
  if (fsGroup !== undefined) args.push('--group-add', String(fsGroup));
  if (security.readOnlyRootFilesystem) args.push('--read-only', '--read-only-tmpfs=false');
  for (const capability of security.capabilities?.drop ?? []) args.push('--cap-drop', capability);
  for (const capability of security.capabilities?.add ?? []) args.push('--cap-add', capability);
  if (security.allowPrivilegeEscalation === false) args.push('--security-opt', 'no-new-privileges');
  if (container.envFrom) fail(`container ${name}: envFrom is not reproduced here`);
  for (const variable of container.env ?? []) args.push('--env', `${variable.name}=${envValue(variable)}`);
  for (const mount of container.volumeMounts ?? []) {
    if (mount.subPath) fail(`container ${name}: mount ${mount.name} with subPath is not reproduced here`);
    const volume = volumeNamed(mount.name);
    if (volume.emptyDir) {
      const size = volume.emptyDir.sizeLimit
        ? `,size=${volume.emptyDir.sizeLimit.replace(/i$/, '').toLowerCase()}`
        : '';
      args.push('--tmpfs', `${mount.mountPath}:rw,mode=1777${size}`);
    } else if (projected(volume)) {
      args.push(
        '--volume',
        `${volumeDirectory(workdir, mount.name)}:${mount.mountPath}:${mount.readOnly ? 'ro' : 'rw'}`,
      );
    } else {
      fail(`container ${name}: volume ${mount.name} is neither emptyDir, configMap nor secret`);
    }
  }
  if (container.command) args.push('--entrypoint', JSON.stringify(container.command));
  args.push(container.image, ...(container.args ?? []).map(String));
  process.stdout.write(args.map((arg) => `${arg}\0`).join(''));
}

function probe(name, kind) {
  const container = containerNamed(name);
  const found = container[`${kind}Probe`];
  if (!found?.httpGet)
    fail(`container ${name}: expected an httpGet ${kind} probe, got ${found ? 'another kind' : 'none'}`);
  let { port } = found.httpGet;
  if (typeof port === 'string') {
    const named = (container.ports ?? []).find((candidate) => candidate.name === port);
    if (!named) fail(`container ${name}: ${kind} probe names port ${port}, which the container does not declare`);
    port = named.containerPort;
  }
  process.stdout.write(`${found.httpGet.path ?? '/'} ${port}\n`);
}

if (command === 'volumes' && rest.length === 1) writeVolumes(rest[0]);
else if (command === 'update' && rest.length === 4) updateVolume(...rest);
else if (command === 'args' && rest.length === 2) runArgs(rest[0], rest[1]);
else if (command === 'probe' && rest.length === 2) probe(rest[0], rest[1]);
else if (command === 'grace' && rest.length === 0) process.stdout.write(`${pod.terminationGracePeriodSeconds ?? 30}\n`);
else usage();
