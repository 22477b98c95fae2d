import { SpanStatusCode, type Span } from '@opentelemetry/api';
import { tracer } from '../tracing/tracing.js';
import type { Route } from './route.js';

/** What the run's span reports of it (CoalesceResult's counts). */
interface RunCounts {
  readonly runId: number | null;
  readonly events: number;
  readonly payloads: number;
  readonly chunks: number;
  readonly deferred: number;
  readonly routes: Partial<Record<Route, number>>;
}

/** Routes that keep an event from a webhook: every route but `deliver` and `collapsed` (merged, not excluded). */
const EXCLUDING: ReadonlySet<Route> = new Set(['disabled', 'asset_gone', 'in_trash', 'excluded', 'unmatched']);

/**
 * Runs one coalescing run, which holds the coalescing lock, inside a span
 * `coalescing run` with its counts: events, payloads, chunks, deferred rows,
 * exclusions (events kept from a webhook, all webhooks added up) and each
 * route's count. `body` gets the span, to record its context with the run.
 * With tracing off the span is @opentelemetry/api's no-op one.
 */
export async function inRunSpan<T extends RunCounts>(body: (span: Span) => Promise<T>): Promise<T> {
  const span = tracer().startSpan('coalescing run');
  try {
    const result = await body(span);
    let exclusions = 0;
    for (const [route, count] of Object.entries(result.routes) as Array<[Route, number]>) {
      span.setAttribute(`asset_webhooks.route.${route}`, count);
      if (EXCLUDING.has(route)) exclusions += count;
    }
    span.setAttributes({
      'asset_webhooks.run.id': result.runId ?? -1,
      'asset_webhooks.events': result.events,
      'asset_webhooks.payloads': result.payloads,
      'asset_webhooks.exclusions': exclusions,
      'asset_webhooks.chunks': result.chunks,
      'asset_webhooks.deferred': result.deferred,
    });
    return result;
  } catch (error) {
    span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.name : 'error' });
    throw error;
  } finally {
    span.end();
  }
}
