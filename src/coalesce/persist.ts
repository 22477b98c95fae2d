import { Params, type Statement } from '../db/columns.js';
import { consumeCtes, type ConsumedEvents } from '../payloads/events.js';
import { payloadGroups, payloadInsert, payloadStatement } from '../payloads/store.js';
import type { Batch } from '../payloads/pack.js';
import type { RoutingFeature } from './routing-feature.js';

/**
 * The statements that write one coalescing chunk, in order, built now (see
 * payloadGroups). `routingId` is the configuration the run routes by (see
 * recordRouting). One statement when the chunk's payload rows fit one
 * INSERT, as they nearly always do, so that its transaction is the
 * statement's own and the chunk costs one round trip. It moves the chunk's
 * events from the outbox to `events` with their routes, writes its payloads,
 * and the routing features' writes (RoutingFeature.chunkWrite), and counts
 * the events on the run (so a run that dies later still shows what
 * it committed) and the routing's last use (retention purges by it). `events`
 * must not be empty.
 */
export function chunkStatements(
  runId: number,
  routingId: number,
  events: ConsumedEvents,
  batches: readonly Batch[],
  features: readonly RoutingFeature[],
  webhookTimestamp: string,
): Statement[] {
  const groups = payloadGroups(batches, webhookTimestamp);
  const last = groups.pop();
  const statements = groups.map((rows) => payloadStatement(runId, rows));
  const params = new Params();
  const run = params.add(runId);
  const routing = params.add(routingId);
  const consume = consumeCtes(params, run, routing, events);
  const payloads = last ? `written as (${payloadInsert(params, run, last)}),` : '';
  const featureWrites = features.flatMap((feature, index) => {
    const write = feature.chunkWrite(params);
    return write === null ? [] : [`feature_${index} as (${write}),`];
  });
  statements.push({
    text: `with ${consume}, ${payloads} ${featureWrites.join(' ')}
       used as (update asset_webhooks.routings set last_used_at = asset_webhooks.now() where routing_id = ${routing})
     update asset_webhooks.coalesce_runs set events = events + ${params.add(events.seqs.length)} where run_id = ${run}`,
    values: params.values,
  });
  return statements;
}
