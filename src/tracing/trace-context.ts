import { isSpanContextValid, type Span, type SpanContext } from '@opentelemetry/api';

/**
 * A W3C traceparent as events.traceparent keeps it (migration 0006): version,
 * trace id, parent id and flags in lowercase hex, the version not ff and
 * neither id all zeros. The coalescer checks the same form before it stores a
 * value (src/payloads/events.ts), so what it stored always parses.
 */
const TRACEPARENT = /^(?!ff)([0-9a-f]{2})-(?!0{32})([0-9a-f]{32})-(?!0{16})([0-9a-f]{16})-([0-9a-f]{2})$/;

/** The `traceparent` header naming `span` as the parent; null when the span has no valid context (tracing off). */
export function traceparentOf(span: Span): string | null {
  const context = span.spanContext();
  if (!isSpanContextValid(context)) return null;
  return `00-${context.traceId}-${context.spanId}-${(context.traceFlags & 0xff).toString(16).padStart(2, '0')}`;
}

/** The trace id of `span` for log lines; null when it has no valid context (tracing off). */
export function traceIdOf(span: Span): string | null {
  const context = span.spanContext();
  return isSpanContextValid(context) ? context.traceId : null;
}

/** The remote span context a stored traceparent names, or null when it is not one. */
export function spanContextOf(traceparent: string): SpanContext | null {
  const match = TRACEPARENT.exec(traceparent);
  if (match === null) return null;
  return { traceId: match[2]!, spanId: match[3]!, traceFlags: parseInt(match[4]!, 16), isRemote: true };
}
