import { trace, type Tracer } from '@opentelemetry/api';
import { packageVersion } from '../version.js';

/** The instrumentation scope of every span of this service. */
const SCOPE = 'asset-webhooks';

/**
 * The tracer every span of the service is started with. Until startTracing
 * has registered a provider it is @opentelemetry/api's no-op tracer: its
 * spans record nothing and are never exported, and asking for one costs an
 * object. So the code that makes spans is the same whether tracing is on.
 */
export function tracer(): Tracer {
  // A proxy: it starts spans with the provider registered later, once there is one.
  cached ??= trace.getTracer(SCOPE, packageVersion());
  return cached;
}

let cached: Tracer | undefined;

/** A running tracer provider: shutdown() exports the spans still buffered, then stops. */
export interface Tracing {
  readonly exporter: 'otlp';
  shutdown(): Promise<void>;
}

/**
 * Whether the standard variables ask for traces: an OTLP endpoint
 * (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) or
 * OTEL_TRACES_EXPORTER=otlp; never with OTEL_SDK_DISABLED=true or
 * OTEL_TRACES_EXPORTER=none. Only OTLP over HTTP with JSON bodies is
 * shipped; another exporter name is `unsupported`.
 */
export function tracingWanted(env: NodeJS.ProcessEnv): 'off' | 'otlp' | { unsupported: string } {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return 'off';
  const exporters = (env.OTEL_TRACES_EXPORTER ?? '')
    .split(',')
    .map((name) => name.trim().toLowerCase())
    .filter((name) => name !== '');
  if (exporters.includes('none')) return 'off';
  const other = exporters.find((name) => name !== 'otlp');
  if (other !== undefined) return { unsupported: other };
  const endpoint = [env.OTEL_EXPORTER_OTLP_ENDPOINT, env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT].some(
    (value) => (value ?? '').trim() !== '',
  );
  return endpoint || exporters.includes('otlp') ? 'otlp' : 'off';
}

/** A positive integer from the environment, or undefined (the SDK's default) when unset or not one. */
function positive(env: NodeJS.ProcessEnv, name: string): number | undefined {
  const value = Number((env[name] ?? '').trim() || NaN);
  return Number.isInteger(value) && value > 0 ? value : undefined;
}

/**
 * Registers a tracer provider that sends spans to the OTLP/HTTP endpoint
 * the environment names, when tracingWanted says so; null otherwise. The SDK
 * is imported here and only here, when tracing is on: a process without the
 * variables loads none of it.
 *
 * Read from the environment: the exporter's own OTEL_EXPORTER_OTLP_*
 * variables (endpoint, headers, timeout, compression, certificates),
 * OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES (default service name
 * `asset-webhooks`), the batch processor's OTEL_BSP_SCHEDULE_DELAY,
 * OTEL_BSP_MAX_QUEUE_SIZE, OTEL_BSP_MAX_EXPORT_BATCH_SIZE and
 * OTEL_BSP_EXPORT_TIMEOUT, OTEL_SPAN_LINK_COUNT_LIMIT, and
 * OTEL_TRACES_SAMPLER_ARG with OTEL_TRACES_SAMPLER
 * `parentbased_traceidratio` or `traceidratio` (any other: every span is kept).
 */
export async function startTracing(env: NodeJS.ProcessEnv): Promise<Tracing | null> {
  if (tracingWanted(env) !== 'otlp') return null;
  const [sdk, { OTLPTraceExporter }, resources] = await Promise.all([
    import('@opentelemetry/sdk-trace'),
    import('@opentelemetry/exporter-trace-otlp-http'),
    import('@opentelemetry/resources'),
  ]);
  const detected = resources.detectResources({ detectors: [resources.envDetector] });
  const resource = resources
    .resourceFromAttributes({ 'service.name': SCOPE, 'service.version': packageVersion() })
    .merge(detected);
  const ratio = Number(env.OTEL_TRACES_SAMPLER_ARG ?? '1');
  const root = new sdk.TraceIdRatioBasedSampler(Number.isFinite(ratio) ? Math.min(1, Math.max(0, ratio)) : 1);
  const samplerName = (env.OTEL_TRACES_SAMPLER ?? '').trim().toLowerCase();
  const sampler =
    samplerName === 'traceidratio'
      ? root
      : samplerName === 'parentbased_traceidratio'
        ? new sdk.ParentBasedSampler({ root })
        : new sdk.AlwaysOnSampler();
  const processor = new sdk.BatchSpanProcessor({
    exporter: new OTLPTraceExporter(),
    scheduledDelayMillis: positive(env, 'OTEL_BSP_SCHEDULE_DELAY'),
    maxQueueSize: positive(env, 'OTEL_BSP_MAX_QUEUE_SIZE'),
    maxExportBatchSize: positive(env, 'OTEL_BSP_MAX_EXPORT_BATCH_SIZE'),
    exportTimeoutMillis: positive(env, 'OTEL_BSP_EXPORT_TIMEOUT'),
  });
  const linkCountLimit = positive(env, 'OTEL_SPAN_LINK_COUNT_LIMIT');
  const provider = new sdk.TracerProvider({
    resource,
    sampler,
    spanProcessors: [processor],
    ...(linkCountLimit === undefined ? {} : { spanLimits: { linkCountLimit } }),
  });
  trace.setGlobalTracerProvider(provider);
  return {
    exporter: 'otlp',
    async shutdown() {
      await provider.shutdown();
      trace.disable();
      cached = undefined;
    },
  };
}
