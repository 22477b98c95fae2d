import { NAMELESS_ATTEMPT_AFTER_SECONDS } from '../delivery/recover.js';
import type { Trace, TraceAttempt } from './trace.js';

/** The trace in words an operator reads at 3 a.m. */
export function renderTrace(trace: Trace): string {
  const lines = [
    `event ${trace.eventId}: ${trace.eventType} of asset ${trace.assetId}${trace.assetUuid ? ` (${trace.assetUuid})` : ''}`,
    `  occurred at ${trace.occurredAt.toISOString()}`,
  ];
  if (trace.state === 'waiting') {
    lines.push('  captured, waiting for the next coalescing run (no webhook has seen it yet)');
    return lines.join('\n');
  }
  if (trace.backfillId !== null) {
    lines.push(
      `  BACKFILLED: written by backfill ${trace.backfillId} at ${trace.coalescedAt!.toISOString()}${trace.atomId !== null ? `, atomId ${trace.atomId}` : ''}` +
        " (not a captured change: the asset passed the webhook's checks when the backfill read it; sent to that webhook only)",
    );
  } else if (trace.reconcileId !== null) {
    lines.push(
      `  RECONCILED: written by reconcile ${trace.reconcileId} at ${trace.coalescedAt!.toISOString()}${trace.atomId !== null ? `, atomId ${trace.atomId}` : ''}` +
        " (not a captured change: it brings the mirror webhook's set to what its checks give; sent to that webhook only)",
    );
  } else {
    lines.push(
      `  coalesced at ${trace.coalescedAt!.toISOString()}${trace.atomId !== null ? `, atomId ${trace.atomId}` : ''}`,
    );
  }
  if (trace.traceparent !== null)
    lines.push(`  captured with trace context ${trace.traceparent}: its delivery attempts' spans link to it`);
  if (trace.routes.length === 0) lines.push('  no webhook was configured when it was coalesced');
  for (const route of trace.routes) {
    if (route.outcome === 'excluded') {
      lines.push(`  ${route.webhookId}: not sent, excluded by ${route.excludedBy}${describeCheck(route.excludedBy)}`);
    } else if (route.outcome === 'collapsed') {
      lines.push(`  ${route.webhookId}: not sent on its own, collapsed into the later edit ${route.collapsedInto}`);
    } else if (route.payload) {
      const p = route.payload;
      const final =
        p.status === 'delivered'
          ? `delivered at ${p.deliveredAt?.toISOString()}`
          : p.status === 'dead_lettered'
            ? `DEAD-LETTERED (${p.deadLetterReason}); redeliver with: asset-webhooks dead-letters redeliver ${p.payloadId}`
            : p.webhookGone
              ? `pending, waiting: webhook suspended since ${p.webhookGone.since.toISOString()} by a 410 Gone answer` +
                `${p.webhookGone.payloadId === null ? '' : ` to payload ${p.webhookGone.payloadId}`} (retry.disableOnGone)` +
                `${p.webhookGone.alsoPaused ? ', and paused by its document (paused: true)' : ''}; sent in order after ` +
                `\`asset-webhooks resume --webhook ${p.webhookId}\` or a new url; the time suspended does not count towards expiry`
              : p.webhookPausedSince
                ? `pending, waiting: webhook paused since ${p.webhookPausedSince.toISOString()}` +
                  ' (sent in order once paused is false again; the time paused does not count towards expiry)'
                : p.nextAttemptAt
                  ? `pending, next attempt at ${p.nextAttemptAt.toISOString()}`
                  : p.webhookRateHeld
                    ? `pending, waiting: held by its webhook's rate limit since ${p.webhookRateHeld.since.toISOString()} ` +
                      `(${p.webhookRateHeld.perSecond} requests a second in force; rateLimit)`
                    : 'pending, waiting for its turn';
      const moved = p.webhookId === route.webhookId ? '' : `, moved to webhook ${p.webhookId}`;
      const unmatched =
        route.sentAs === 'UNMATCHED' && trace.eventType !== 'UNMATCHED'
          ? ` sent as UNMATCHED: the asset left the mirror webhook's set, excluded by ${route.excludedBy}${describeCheck(route.excludedBy)};`
          : '';
      lines.push(
        `  ${route.webhookId}:${unmatched} in payload ${p.payloadId} (${p.eventCount} events, created ${p.createdAt.toISOString()}${moved}): ${final}`,
      );
      // Attempts in order of series: a redelivery or a replay starts a new series, numbered from attempt 1 again.
      for (let series = 1; series <= p.series; series += 1) {
        const redelivery = p.redeliveries.find((r) => r.series === series);
        if (redelivery) {
          // Sent to the webhook that the next move took it from, or where it is now.
          const to = p.redeliveries.find((r) => r.series > series && r.movedFrom !== null)?.movedFrom ?? p.webhookId;
          const move =
            redelivery.movedFrom === null ? '' : ` to webhook ${to} (moved from webhook ${redelivery.movedFrom})`;
          lines.push(
            redelivery.replayId === null
              ? `    redelivered as series ${series}${move}, requested by ${redelivery.requestedBy} at ${redelivery.requestedAt.toISOString()}` +
                  ` (series ${series - 1} had ended ${redelivery.previousReason ?? 'dead-lettered'})`
              : `    replayed as series ${series} by replay ${redelivery.replayId}${move}, requested by ${redelivery.requestedBy} at ` +
                  `${redelivery.requestedAt.toISOString()} (series ${series - 1} had been delivered)`,
          );
        }
        for (const a of p.attempts.filter((attempt) => attempt.series === series)) {
          const result = a.statusCode !== null ? `HTTP ${a.statusCode}` : (a.error ?? 'no result recorded yet');
          lines.push(
            `    attempt ${a.attempt}${p.series > 1 ? ` of series ${series}` : ''} at ${a.startedAt.toISOString()}: ${result}` +
              `${a.durationMs !== null ? ` in ${a.durationMs} ms` : ''} -> ${a.outcome ?? inProgress(a)}`,
          );
        }
      }
    }
  }
  return lines.join('\n');
}

/** An attempt without a result: the request is still out, or its process died and crash recovery closes it. */
function inProgress(attempt: TraceAttempt): string {
  if (!attempt.sent) {
    return attempt.processGone === true
      ? 'claimed as a standby and never sent: its run process is gone; a running service puts the payload back in its queue without counting the attempt'
      : "claimed as a standby, not sent yet (sent when one of its run process's requests to the webhook ends)";
  }
  if (attempt.processGone === false) return 'in progress (its run process is alive)';
  if (attempt.processGone === true) {
    return (
      'interrupted: its run process is gone; a running service closes the attempt and sends the payload again' +
      ' once the attempt is older than the request timeout plus 5 s'
    );
  }
  const handBack = new Date(attempt.startedAt.getTime() + NAMELESS_ATTEMPT_AFTER_SECONDS * 1000).toISOString();
  return `in progress (if its process stopped, the attempt is closed and the payload sent again from about ${handBack})`;
}

function describeCheck(check: string | null): string {
  switch (check) {
    case 'disabled':
      return ' (the webhook was disabled)';
    case 'resource_type':
      return " (the asset's supertype is not in resourceTypes)";
    case 'event_type':
      return ' (the event type is not in eventTypes)';
    case 'parent':
      return ' (a child asset; only top-level assets pass without a parentId filter)';
    case 'asset_gone':
      return ' (the asset no longer existed when the event was coalesced)';
    case 'in_trash':
      return ' (a change of an asset in the Trash: not an EDITED or REVERSION for any webhook; its restore sends EDITED)';
    default:
      return check?.startsWith('filter:')
        ? ` (filter group ${check.slice(7)} of the webhook did not pass; try asset-webhooks explain)`
        : '';
  }
}
