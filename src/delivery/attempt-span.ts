import { SpanKind, SpanStatusCode, type Link, type Span } from '@opentelemetry/api';
import type pg from 'pg';
import { spanContextOf, traceIdOf, traceparentOf } from '../tracing/trace-context.js';
import { tracer } from '../tracing/tracing.js';
import type { AttemptResult, ClaimedPayload } from './attempt-store.js';

/**
 * The most captured contexts one attempt's span links to. A payload of many
 * events, each from its own transaction, would otherwise make one span of
 * thousands of links; the SDK's own limit (OTEL_SPAN_LINK_COUNT_LIMIT,
 * default 128) applies on top.
 */
export const MAX_CAPTURED_LINKS = 32;

/** One delivery attempt's span, and what the attempt carries of it. */
export interface AttemptSpan {
  readonly span: Span;
  /** The `traceparent` header of the POST: this span as the receiver's parent. Null with tracing off. */
  readonly traceparent: string | null;
  /** For the attempt's log lines (`trace_id`). Null with tracing off. */
  readonly traceId: string | null;
  /** The read of the span's links, under way beside the request; null when the span does not record. */
  readonly linked: Promise<void> | null;
}

/**
 * Starts the span of one delivery attempt (`webhook attempt`, a client
 * span). With tracing on it links to the contexts the capture stored with the
 * payload's events and with the edits collapsed into them (at most
 * MAX_CAPTURED_LINKS, distinct), and to the coalescing run that made the
 * payload: one read by the payload's id, made only when the span records,
 * and made beside the request, which does not wait for it. A failed read
 * costs the links, never the attempt. The span never holds the webhook's
 * URL, headers or body: only ids, counts and the answer's status.
 */
export function startAttemptSpan(pool: pg.Pool, claimed: ClaimedPayload): AttemptSpan {
  const span = tracer().startSpan('webhook attempt', {
    kind: SpanKind.CLIENT,
    attributes: {
      'asset_webhooks.webhook.id': claimed.webhookId,
      'asset_webhooks.payload.id': claimed.payloadId,
      'asset_webhooks.attempt': claimed.attemptNo,
      'asset_webhooks.series': claimed.series,
      'asset_webhooks.standby': claimed.standby,
      'http.request.method': 'POST',
    },
  });
  const linked = span.isRecording()
    ? capturedLinks(pool, claimed.payloadId).then(
        (links) => {
          span.addLinks(links);
        },
        (error: unknown) => {
          // Told on the span: the attempt went ahead without its links.
          span.setAttribute('asset_webhooks.links.error', (error as { code?: string } | null)?.code ?? 'error');
        },
      )
    : null;
  return { span, traceparent: traceparentOf(span), traceId: traceIdOf(span), linked };
}

/**
 * Ends the attempt's span with its answer and outcome; an attempt that did
 * not deliver is an error. The span ends at this moment, but once its links
 * are read (a read still under way is not waited for by the attempt).
 */
export function endAttemptSpan(attempt: AttemptSpan, result: AttemptResult | null): void {
  const { span, linked } = attempt;
  if (result !== null) {
    if (result.statusCode !== null) span.setAttribute('http.response.status_code', result.statusCode);
    if (result.errorClass !== null) span.setAttribute('error.type', result.errorClass);
    else if (result.outcome !== 'delivered' && result.statusCode !== null)
      span.setAttribute('error.type', String(result.statusCode));
    span.setAttribute('asset_webhooks.outcome', result.outcome);
    if (result.outcome !== 'delivered') span.setStatus({ code: SpanStatusCode.ERROR, message: result.outcome });
  }
  if (linked === null) span.end();
  else {
    const endedAt = Date.now();
    void linked.then(() => span.end(endedAt));
  }
}

/** The links of a payload's attempt: the captured contexts of its events, then its coalescing run's. */
async function capturedLinks(pool: pg.Pool, payloadId: number): Promise<Link[]> {
  const { rows } = await pool.query<{ traceparent: string; kind: string }>(
    `with p as (select p.event_ids, p.run_id from asset_webhooks.payloads p where p.payload_id = $1),
       captured as (
         select e.traceparent from p, asset_webhooks.events e
         where e.event_id = any(p.event_ids) and e.traceparent is not null
         union
         select c.traceparent from p, asset_webhooks.events c
         where c.collapsed_into = any(p.event_ids) and c.collapsed_into is not null and c.traceparent is not null
       )
       (select traceparent, 'capture' as kind from captured limit $2)
       union all
       select r.traceparent, 'coalescing run' from asset_webhooks.coalesce_runs r
       where r.run_id = (select run_id from p) and r.traceparent is not null`,
    [payloadId, MAX_CAPTURED_LINKS],
  );
  return rows.flatMap((row) => {
    const context = spanContextOf(row.traceparent);
    return context === null ? [] : [{ context, attributes: { 'asset_webhooks.link': row.kind } }];
  });
}
