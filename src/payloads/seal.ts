import type pg from 'pg';
import { Params } from '../db/columns.js';
import type { DecimalId, EventType } from '../interfaces.js';
import { sealPayloads } from '../lifecycle/payload-rows.js';
import { serializeBody, serializeEvent } from '../payloads/serialize.js';
import { eventTimestampText } from '../db/event-timestamp.js';

/**
 * Seals the payloads a crashed run left `open`: each gets the body of the
 * events that name it (written in the same transactions as the payload row),
 * in order of capture, serialized as the run would have, with the time of
 * sealing as its webhookTimestamp, written by the lifecycle module in one
 * statement. Returns the webhooks of the sealed payloads.
 */
export async function sealOpenPayloads(
  client: pg.Pool | pg.PoolClient,
  webhookTimestamp: () => string,
): Promise<string[]> {
  const { rows: open } = await client.query<{ payload_id: number; webhook_id: string; since: Date | null }>(
    `select p.payload_id, p.webhook_id, r.started_at as since
     from asset_webhooks.payloads p left join asset_webhooks.coalesce_runs r on r.run_id = p.run_id
     where p.status = 'open'`,
  );
  if (open.length === 0) return [];
  const ids = open.map((row) => row.payload_id);
  const since = open.some((row) => row.since === null)
    ? null
    : new Date(Math.min(...open.map((row) => row.since!.getTime())));
  // A run's events were coalesced after it started: the index on coalesced_at bounds the search.
  const params = new Params();
  const { rows: events } = await client.query<{
    payload_ids: Array<number | string>;
    event_id: string;
    event_timestamp: string;
    atom_id: DecimalId | null;
    asset_id: DecimalId;
    asset_uuid: string | null;
    event_type: EventType;
  }>(
    `select e.payload_ids, e.event_id,
            ${eventTimestampText('e.occurred_at')} as event_timestamp,
            e.atom_id::text as atom_id, e.asset_id::text as asset_id, e.asset_uuid, e.event_type
     from asset_webhooks.events e
     where e.coalesced_at >= coalesce(${params.add(since, 'timestamptz')}, '-infinity') and e.payload_ids && ${params.add(ids, 'bigint[]')}
     order by e.seq`,
    params.values,
  );
  const sealedAt = webhookTimestamp();
  // Keyed by the id's decimal string: bigint[] elements come back as strings.
  const members = new Map<string, { json: string[]; ids: string[] }>(
    ids.map((id) => [String(id), { json: [], ids: [] }]),
  );
  for (const event of events) {
    const json = serializeEvent({
      atomId: event.atom_id,
      eventId: event.event_id,
      eventTimestamp: event.event_timestamp,
      assetId: event.asset_id,
      assetUuid: event.asset_uuid ?? '',
      eventType: event.event_type,
    });
    for (const id of event.payload_ids) {
      const member = members.get(String(id));
      if (member) {
        member.json.push(json);
        member.ids.push(event.event_id);
      }
    }
  }
  await sealPayloads(
    client,
    [...members].map(([id, member]) => ({
      payloadId: Number(id),
      body: serializeBody(member.json, sealedAt),
      eventIds: `{${member.ids.join(',')}}`,
      eventCount: member.ids.length,
    })),
  );
  return open.map((row) => row.webhook_id);
}
