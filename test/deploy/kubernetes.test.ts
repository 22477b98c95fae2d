import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { posix } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  PrometheusRule,
  ServiceMonitor,
  type IPrometheusRule,
  type IServiceMonitor,
} from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1';
import { Deployment, type IDeployment } from 'kubernetes-models/apps/v1';
import { NetworkPolicy, type INetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import { PodDisruptionBudget, type IPodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { ResourceClaim } from 'kubernetes-models/resource.k8s.io/v1';
import {
  ConfigMap,
  Secret,
  Service,
  ServiceAccount,
  type IConfigMap,
  type IContainer,
  type IEnvVar,
  type IPodSpec,
  type ISecret,
  type IService,
} from 'kubernetes-models/v1';
import { describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { buildProgram } from '../../src/cli/main.js';
import { runCli } from '../helpers/cli.js';
import { useTempDirectories } from '../helpers/temp-directories.js';
import { useTestDatabase } from '../helpers/test-database.js';

/**
 * deploy/kubernetes/ holds plain manifests a platform team applies with
 * `kubectl apply -k`. They must be valid for the API server (checked against
 * the Kubernetes and Prometheus Operator schemas of the kubernetes-models
 * packages), run the CLI with flags it has, and agree with each other and with
 * deploy/prometheus/alerts.yaml.
 */

const tempDirectory = useTempDirectories();
const db = useTestDatabase({ empty: true });
const folder = fileURLToPath(new URL('../../deploy/kubernetes/', import.meta.url));
const read = (name: string): string => readFileSync(posix.join(folder, name), 'utf8');

interface Manifest {
  readonly apiVersion: string;
  readonly kind: string;
  readonly metadata: { readonly name: string; readonly labels?: Record<string, string> };
}

/** The schema of each kind the folder may hold; any other kind is refused. */
const MODELS: Record<string, new (data: never) => { validate(): void }> = {
  'v1/ConfigMap': ConfigMap,
  'v1/Secret': Secret,
  'v1/Service': Service,
  'v1/ServiceAccount': ServiceAccount,
  'apps/v1/Deployment': Deployment,
  'networking.k8s.io/v1/NetworkPolicy': NetworkPolicy,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'monitoring.coreos.com/v1/ServiceMonitor': ServiceMonitor,
  'monitoring.coreos.com/v1/PrometheusRule': PrometheusRule,
};

/** Throws, naming the file, the kind and the schema's complaint, unless the manifest is valid. */
function validate(manifest: Manifest, where: string): void {
  const Model = MODELS[`${manifest.apiVersion}/${manifest.kind}`];
  if (!Model)
    throw new Error(
      `${where}: expected one of ${Object.keys(MODELS).join(', ')}, got ${manifest.apiVersion}/${manifest.kind}`,
    );
  try {
    new Model(structuredClone(manifest) as never).validate();
  } catch (error) {
    throw new Error(`${where}: ${manifest.kind} ${manifest.metadata?.name}: ${(error as Error).message}`);
  }
}

const kustomization = parse(read('kustomization.yaml')) as {
  resources: string[];
  images: { name: string }[];
  configMapGenerator: { name: string; files: string[] }[];
};
const manifests: { file: string; manifest: Manifest }[] = kustomization.resources.flatMap((file) =>
  parseAllDocuments(read(file)).map((document) => {
    expect(document.errors, file).toEqual([]);
    return { file, manifest: document.toJS() as Manifest };
  }),
);
function one<T>(kind: string, name?: string): T {
  const found = manifests.filter(
    ({ manifest }) => manifest.kind === kind && (!name || manifest.metadata.name === name),
  );
  expect(
    found.map(({ file }) => file),
    `one ${kind}${name ? ` ${name}` : ''}`,
  ).toHaveLength(1);
  return found[0]!.manifest as T;
}

const deployment = one<IDeployment>('Deployment');
const configMap = one<IConfigMap>('ConfigMap');
const databaseSecret = one<ISecret>('Secret', 'asset-webhooks');
const apiKeysSecret = one<ISecret>('Secret', 'asset-webhooks-api-keys');
const podSpec = deployment.spec!.template.spec!;
const runContainer = podSpec.containers[0]!;
const migrateContainer = podSpec.initContainers?.[0];
const containers = [...(podSpec.initContainers ?? []), ...podSpec.containers];

/** The value a container's environment gives a variable; undefined when it is not set. */
const envOf = (container: IContainer, name: string): IEnvVar | undefined =>
  container.env?.find((variable) => variable.name === name);

/**
 * Parses a container's args with the real command line: the command must
 * exist, every flag must be one of its options and its value must pass the
 * option's own parser. Returns the command's name and parsed options.
 */
async function parseArgs(container: IContainer): Promise<{ command: string; options: Record<string, unknown> }> {
  const [name, ...rest] = container.args ?? [];
  const command = (await buildProgram()).commands.find((candidate) => candidate.name() === name);
  if (!command) throw new Error(`${container.name}: expected a command of asset-webhooks, got ${JSON.stringify(name)}`);
  command.configureOutput({ writeErr: () => {} });
  const { operands, unknown } = command.parseOptions(rest);
  if (unknown.length || operands.length)
    throw new Error(`${container.name}: ${name} has no option or operand ${JSON.stringify([...unknown, ...operands])}`);
  return { command: name!, options: command.opts() };
}

describe('deploy/kubernetes', () => {
  it('lists every manifest of the folder in kustomization.yaml, once', () => {
    const files = readdirSync(folder)
      .filter((file) => file.endsWith('.yaml') && file !== 'kustomization.yaml')
      .sort();
    expect([...kustomization.resources].sort()).toEqual(files);
    expect(new Set(kustomization.resources).size).toBe(kustomization.resources.length);
  });

  it('runs the image whose name kustomization.yaml replaces, in every container', () => {
    const names = kustomization.images.map((image) => image.name);
    expect(containers).toHaveLength(2);
    for (const container of containers) expect(names, container.name).toContain(container.image);
  });

  it.each(kustomization.resources)('%s is valid against the API schemas', (file) => {
    const inFile = manifests.filter((entry) => entry.file === file);
    expect(inFile.length).toBeGreaterThan(0);
    for (const { manifest } of inFile) {
      validate(manifest, file);
      expect(manifest.metadata.labels?.['app.kubernetes.io/name'], `${file}: app.kubernetes.io/name`).toBe(
        'asset-webhooks',
      );
    }
  });

  it('refuses an invalid manifest, an unknown kind and a flag the CLI does not have (the checks can fail)', async () => {
    const badReplicas = structuredClone(deployment) as unknown as { spec: { replicas: unknown } } & Manifest;
    badReplicas.spec.replicas = 'two';
    expect(() => validate(badReplicas, 'test')).toThrow(/spec\/replicas must be integer/);
    const noContainers = structuredClone(deployment) as unknown as {
      spec: { template: { spec: IPodSpec } };
    } & Manifest;
    delete (noContainers.spec.template.spec as { containers?: unknown }).containers;
    expect(() => validate(noContainers, 'test')).toThrow(/must have required property 'containers'|containers/);
    const badRule = structuredClone(one<IPrometheusRule>('PrometheusRule')) as unknown as Manifest & {
      spec: { groups: { rules: { for?: string }[] }[] };
    };
    badRule.spec.groups[0]!.rules[0]!.for = 'five minutes';
    expect(() => validate(badRule, 'test')).toThrow(/rules\/0\/for must match pattern/);
    expect(() => validate({ apiVersion: 'apps/v1', kind: 'StatefulSet', metadata: { name: 'x' } }, 'test')).toThrow(
      /expected one of .*, got apps\/v1\/StatefulSet/,
    );
    await expect(parseArgs({ ...runContainer, args: ['run', '--http-prot', '9464'] })).rejects.toThrow(/--http-prot/);
    await expect(parseArgs({ ...runContainer, args: ['run', '--http-port', 'metrics'] })).rejects.toThrow(
      /--http-port: expected an integer/,
    );
    await expect(parseArgs({ ...runContainer, args: ['serve'] })).rejects.toThrow(/expected a command/);
  });

  it('validates with the schemas of Kubernetes 1.34 or later (resource.k8s.io/v1 is GA in 1.34)', () => {
    expect(() => new ResourceClaim({ metadata: { name: 'x' }, spec: {} }).validate()).not.toThrow();
  });

  it('migrates with the binding in an init container, mounted from the generated ConfigMap', async () => {
    expect(migrateContainer?.name).toBe('migrate');
    const { command, options } = await parseArgs(migrateContainer!);
    expect(command).toBe('migrate');
    // `run` refuses a database without a binding: the migration must install one.
    const binding = options.binding as string;
    expect(binding).toMatch(/^\//);
    const mount = migrateContainer!.volumeMounts?.find((candidate) => candidate.mountPath === posix.dirname(binding));
    expect(mount, `a volume mounted at ${posix.dirname(binding)}`).toBeDefined();
    const volume = podSpec.volumes?.find((candidate) => candidate.name === mount!.name);
    const generator = kustomization.configMapGenerator.find((candidate) => candidate.name === volume?.configMap?.name);
    expect(generator, `a configMapGenerator named ${volume?.configMap?.name}`).toBeDefined();
    expect(generator!.files).toEqual([posix.basename(binding)]);
    // The shipped placeholder stops the migration with a message naming the edit.
    expect(read(posix.basename(binding))).toMatch(/raise exception '.*expected the binding of your asset schema/);
    // A Job would hit its immutable fields on the next apply: none is shipped.
    expect(manifests.map(({ manifest }) => manifest.kind)).not.toContain('Job');
  });

  it('stops the migration at the shipped placeholder binding, naming the edit, with no binding installed', async () => {
    const result = await runCli(['migrate', '--database-url', db.url, '--binding', posix.join(folder, 'binding.sql')]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(
      'deploy/kubernetes/binding.sql: expected the binding of your asset schema, got the placeholder shipped with the manifests',
    );
    const { rows } = await db.pool.query<{ view: string | null }>(
      "select to_regclass('asset_webhooks.asset_state')::text as view",
    );
    expect(rows[0]!.view).toBeNull();
  });

  it('runs with --watch-config and --http-port, with flags the CLI has', async () => {
    const { command, options } = await parseArgs(runContainer);
    expect(command).toBe('run');
    expect(options).toMatchObject({ watchConfig: true, httpPort: 9464 });
    const metrics = runContainer.ports?.find((port) => port.name === 'metrics');
    expect(metrics?.containerPort).toBe(options.httpPort);
  });

  it('runs two replicas as non-root on a read-only root filesystem, with probes, requests and a writable /tmp', () => {
    expect(deployment.spec!.replicas).toBe(2);
    expect(podSpec.securityContext?.runAsNonRoot).toBe(true);
    // The image's USER is a name (`node`); the kubelet can only check a number.
    expect(podSpec.securityContext?.runAsUser).toBeGreaterThan(0);
    for (const container of containers) {
      expect(container.securityContext).toMatchObject({
        readOnlyRootFilesystem: true,
        allowPrivilegeEscalation: false,
        capabilities: { drop: ['ALL'] },
      });
      expect(container.resources?.requests).toMatchObject({ cpu: expect.any(String), memory: expect.any(String) });
    }
    expect(runContainer.livenessProbe?.httpGet).toMatchObject({ path: '/livez', port: 'metrics' });
    expect(runContainer.startupProbe?.httpGet).toMatchObject({ path: '/livez', port: 'metrics' });
    expect(runContainer.readinessProbe?.httpGet).toMatchObject({ path: '/readyz', port: 'metrics' });
    const tmp = runContainer.volumeMounts?.find((mount) => mount.mountPath === '/tmp');
    expect(podSpec.volumes?.find((volume) => volume.name === tmp?.name)?.emptyDir).toBeDefined();
  });

  it('reads a valid document from the ConfigMap through a directory mount, which sees its updates', async () => {
    // From the environment, so that a command run in the pod finds it too (`kubectl exec ... -- asset-webhooks explain`).
    expect((await parseArgs(runContainer)).options.config).toBeUndefined();
    const configPath = envOf(runContainer, 'ASSET_WEBHOOKS_CONFIG')?.value;
    expect(configPath, 'ASSET_WEBHOOKS_CONFIG').toMatch(/^\//);
    const mount = runContainer.volumeMounts?.find((candidate) => candidate.mountPath === posix.dirname(configPath!));
    expect(mount, `a volume mounted at ${posix.dirname(configPath!)}`).toBeDefined();
    // A subPath mount is a copy taken at start: --watch-config would never see an edit.
    expect(mount!.subPath).toBeUndefined();
    const volume = podSpec.volumes?.find((candidate) => candidate.name === mount!.name);
    expect(volume?.configMap?.name).toBe(configMap.metadata!.name);
    const document = configMap.data?.[posix.basename(configPath!)];
    expect(document, `ConfigMap key ${posix.basename(configPath!)}`).toBeDefined();

    const file = posix.join(tempDirectory('kubernetes-config'), 'webhooks.yaml');
    writeFileSync(file, document!);
    const result = await runCli(['check-config', file]);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
  });

  it('gives both containers DATABASE_URL from the Secret, and run every apikey of the document as a file', () => {
    expect(Object.keys({ ...databaseSecret.stringData, ...databaseSecret.data })).toEqual(['DATABASE_URL']);
    for (const container of containers)
      expect(envOf(container, 'DATABASE_URL')?.valueFrom?.secretKeyRef, container.name).toEqual({
        name: databaseSecret.metadata!.name,
        key: 'DATABASE_URL',
      });
    // Files, not the environment: the kubelet updates a mounted Secret in place, a pod's environment never.
    const document = parse(configMap.data!['webhooks.yaml']!) as {
      assetUpdater: { secrets?: { provider?: string; directory?: string }; webhooks: { apikey?: string }[] };
    };
    expect(document.assetUpdater.secrets?.provider).toBe('file');
    const mount = runContainer.volumeMounts?.find(
      (candidate) => candidate.mountPath === document.assetUpdater.secrets?.directory,
    );
    expect(mount, `a volume mounted at secrets.directory ${document.assetUpdater.secrets?.directory}`).toBeDefined();
    expect(mount!.subPath).toBeUndefined();
    const volume = podSpec.volumes?.find((candidate) => candidate.name === mount!.name);
    expect(volume?.secret?.secretName).toBe(apiKeysSecret.metadata!.name);
    // 0440, group fsGroup: readable by the process's group, and by nobody else.
    expect(volume?.secret?.defaultMode).toBe(0o440);
    expect(podSpec.securityContext?.fsGroup).toBe(podSpec.securityContext?.runAsGroup);
    const keys = Object.keys({ ...apiKeysSecret.stringData, ...apiKeysSecret.data });
    const apikeys = document.assetUpdater.webhooks.flatMap((webhook) => (webhook.apikey ? [webhook.apikey] : []));
    expect(apikeys.length).toBeGreaterThan(0);
    for (const name of apikeys) expect(keys, `the Secret for apikey ${name}`).toContain(name);
    for (const container of containers) expect(container.envFrom, container.name).toBeUndefined();
  });

  it('lets egress reach only DNS, the database and receivers on 443', () => {
    const policy = one<INetworkPolicy>('NetworkPolicy');
    expect(policy.spec!.policyTypes).toEqual(['Egress']);
    expect(deployment.spec!.template.metadata!.labels).toMatchObject(policy.spec!.podSelector!.matchLabels!);
    const ports = policy.spec!.egress!.map((rule) => rule.ports!.map((port) => `${port.protocol}/${port.port}`));
    expect(ports).toEqual([['UDP/53', 'TCP/53'], ['TCP/5432'], ['TCP/443']]);
    // The receivers' rule keeps private ranges out (cloud metadata, the cluster's own networks).
    expect(policy.spec!.egress![2]!.to![0]!.ipBlock?.except).toEqual(
      expect.arrayContaining(['10.0.0.0/8', '169.254.0.0/16', '172.16.0.0/12', '192.168.0.0/16']),
    );
  });

  it('selects the run pods from the PodDisruptionBudget and the Service, and the Service from the ServiceMonitor', () => {
    const podLabels = deployment.spec!.template.metadata!.labels!;
    expect(deployment.spec!.selector.matchLabels).toEqual(podLabels);
    const budget = one<IPodDisruptionBudget>('PodDisruptionBudget');
    expect(budget.spec!.selector!.matchLabels).toEqual(podLabels);
    expect(budget.spec!.minAvailable).toBeLessThan(deployment.spec!.replicas!);
    const service = one<IService>('Service');
    expect(service.spec!.selector).toEqual(podLabels);
    expect(service.spec!.ports?.map((port) => port.targetPort)).toContain('metrics');
    const monitor = one<IServiceMonitor>('ServiceMonitor');
    expect(service.metadata!.labels).toMatchObject(monitor.spec.selector.matchLabels!);
    expect(monitor.spec.endpoints?.map((endpoint) => [endpoint.port, endpoint.path])).toEqual([
      ['metrics', '/metrics'],
    ]);
    // The service never calls the Kubernetes API: no token in its pods.
    const account = one<Manifest & { automountServiceAccountToken?: boolean }>('ServiceAccount');
    expect(account.automountServiceAccountToken).toBe(false);
    expect(podSpec.serviceAccountName).toBe(account.metadata.name);
    // A database outage makes every pod unready: the budget must not then hold a drain.
    expect(budget.spec!.unhealthyPodEvictionPolicy).toBe('AlwaysAllow');
  });

  it('carries the rules of deploy/prometheus/alerts.yaml in the PrometheusRule', () => {
    const alerts = parse(
      readFileSync(fileURLToPath(new URL('../../deploy/prometheus/alerts.yaml', import.meta.url)), 'utf8'),
    ) as {
      groups: unknown[];
    };
    expect(
      one<IPrometheusRule>('PrometheusRule').spec.groups,
      'prometheusrule.yaml differs from alerts.yaml: run node scripts/kubernetes/prometheus-rule.mjs',
    ).toEqual(alerts.groups);
  });
});
