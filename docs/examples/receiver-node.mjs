// A minimal asset-webhooks receiver in Node.js: verifies the Standard Webhooks
// signature, ignores a payload it has received before (same webhook-id),
// deduplicates events by eventId, keeps per asset only an event newer than
// the one it holds, and answers 2xx only once the events are stored.
//
//   npm install standardwebhooks
//   WEBHOOK_SECRET='whsec_...' PORT=8080 node receiver-node.mjs
//
// The in-memory sets and map stand in for your database: keep them in durable
// storage and update them in the same transaction as the change they record.
import { createServer } from 'node:http';
import { Webhook } from 'standardwebhooks';

// The library takes the whole 'whsec_...' string and uses the base64-decoded
// part after 'whsec_' as the HMAC key.
const webhook = new Webhook(process.env.WEBHOOK_SECRET);
/** webhook-ids of the payloads stored: a retry or a redelivery of one is ignored. */
const seenWebhookIds = new Set();
const seenEventIds = new Set();
/** assetUuid -> the eventTimestamp of the latest event applied (removals included). */
const appliedAt = new Map();
/** The service sends at most 16 MB per payload; anything larger is not from it. */
const MAX_BODY_BYTES = 16 * 1024 * 1024;

function apply(event) {
  if (seenEventIds.has(event.eventId)) return 'duplicate';
  seenEventIds.add(event.eventId);
  // Apply an event only when its eventTimestamp is greater than the one held:
  // an older or equal one is ignored. ISO-8601 UTC timestamps with milliseconds
  // and Z compare as strings.
  const held = appliedAt.get(event.assetUuid);
  if (held !== undefined && event.eventTimestamp <= held) return 'older';
  appliedAt.set(event.assetUuid, event.eventTimestamp);
  switch (event.eventType) {
    case 'PURGED':
      return 'removed'; // delete your copy for good
    case 'UNMATCHED':
      return 'removed'; // mirror webhooks only: no longer in your set; it may come back with a later EDITED
    case 'DELETED':
      return 'archived'; // hide it: it may come back with a later EDITED
    default:
      return 'upserted'; // CREATED, EDITED, REVERSION: fetch or refresh the asset
  }
}

const server = createServer((request, response) => {
  if (request.method !== 'POST') return void response.writeHead(405).end();
  const chunks = [];
  let size = 0;
  request.on('data', (chunk) => {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) request.destroy();
    else chunks.push(chunk);
  });
  request.on('end', () => {
    const body = Buffer.concat(chunks).toString('utf8');
    let payload;
    try {
      // Throws unless one of the webhook-signature entries matches the exact
      // body and the webhook-timestamp is within five minutes.
      payload = webhook.verify(body, request.headers);
    } catch {
      console.log('refused: no valid signature');
      // A 4xx is final: the payload is dead-lettered, not retried.
      return void response.writeHead(401).end();
    }
    const webhookId = request.headers['webhook-id'];
    if (seenWebhookIds.has(webhookId)) {
      // Our 2xx did not reach the service, or an operator sent it again: stored already.
      console.log(`ignored ${webhookId}: received before`);
      return void response.writeHead(204).end();
    }
    const results = payload.events.map(apply);
    seenWebhookIds.add(webhookId);
    console.log(`accepted ${webhookId} with ${payload.count} events: ${results.join(',')}`);
    response.writeHead(204).end();
  });
});

server.listen(Number(process.env.PORT ?? 8080), process.env.HOST ?? '127.0.0.1', () => {
  console.log(`listening on ${server.address().port}`);
});
