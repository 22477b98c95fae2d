import { createHash } from 'node:crypto';
import { z } from 'zod';
import { EVENT_TYPES, type EventType } from '../../interfaces.js';
import { filterGroup } from './filters.js';
import { headers } from './headers.js';
import { rateLimit } from './rate-limit.js';
import { intRange, nonEmptyString } from './primitives.js';
import { httpUrl } from './urls.js';

/** Payload names of the event types by their lower-case configuration names (Created → CREATED). */
const EVENT_TYPE_BY_NAME = new Map<string, EventType>(EVENT_TYPES.map((type) => [type.toLowerCase(), type]));
const EVENT_TYPE_NAMES = 'Created, Edited, Deleted, Purged, Reversion, Unmatched';

/**
 * `Unmatched` names what a mirror webhook gets when an asset leaves its set.
 * A mirror webhook gets it whether listed or not; it is read as the marker
 * `null`, which the webhook's schema refuses on a webhook without `mirror`
 * and then drops.
 */
const eventTypeName = z
  .string({ error: `expected one of ${EVENT_TYPE_NAMES}` })
  .refine((value) => value.toLowerCase() === 'unmatched' || EVENT_TYPE_BY_NAME.has(value.toLowerCase()), {
    error: `expected one of ${EVENT_TYPE_NAMES} (any case)`,
  })
  .transform((value) => EVENT_TYPE_BY_NAME.get(value.toLowerCase()) ?? null);

/** An event type's configuration name (CREATED → Created). */
const configName = (type: string): string => type.charAt(0) + type.slice(1).toLowerCase();

/** What a mirror webhook must receive for its receiver's copy to follow the assets. */
const MIRROR_EVENT_TYPES: readonly EventType[] = ['CREATED', 'EDITED', 'DELETED', 'PURGED'];

/** One entry of `webhooks`: a receiver and what it gets. */
const webhookKeys = z.strictObject({
  /** Unique among the webhooks. Left out, it is derived from the url (see defaultWebhookId). */
  id: z
    .string({ error: 'expected an id of 1 to 64 characters A-Z a-z 0-9 _ . -' })
    .regex(/^[A-Za-z0-9_.-]{1,64}$/, { error: 'expected an id of 1 to 64 characters A-Z a-z 0-9 _ . -' })
    .optional(),
  url: httpUrl,
  enabled: z.boolean({ error: 'expected true or false' }),
  /**
   * A pause for a receiver's maintenance window: events are still coalesced
   * into payloads, which wait in order without expiring (the time paused does
   * not count towards retry.deadLetterAfterSeconds) and are sent once `paused`
   * is false again. With `enabled: false` the webhook is disabled: it receives
   * nothing and its waiting payloads expire.
   */
  paused: z.boolean({ error: 'expected true or false' }).default(false),
  /** The name of a secret-manager entry (never the secret itself). */
  apikey: nonEmptyString.optional(),
  headers: headers.optional(),
  /**
   * Standard Webhooks signing. `secret` is the name of a secret-manager entry
   * (resolved like `apikey`, never the secret itself) whose value is one or
   * more `whsec_` keys separated by spaces; each key signs. Left out, requests
   * are unsigned.
   */
  signing: z.strictObject({ secret: nonEmptyString }, { error: 'expected a mapping with the key secret' }).optional(),
  /** Supertypes to deliver. */
  resourceTypes: z
    .array(nonEmptyString, { error: 'expected a list of supertypes' })
    .min(1, { error: 'expected at least one resource type' })
    .default(() => ['Resource']),
  /** Event types to deliver, any case, normalized to the payload form (Created → CREATED). */
  eventTypes: z
    .array(eventTypeName, { error: `expected a list of ${EVENT_TYPE_NAMES}` })
    .min(1, { error: 'expected at least one event type' })
    .default(() => [...EVENT_TYPES]),
  /** Events per payload; the default is the specification's. */
  batchSize: intRange(1, 100).default(100),
  /** Payloads in flight; 1 means strictly in order. */
  concurrency: intRange(1, 64).default(1),
  /** Requests per second to the webhook from all `run` processes together (see rate-limit.ts); left out, no limit. */
  rateLimit: rateLimit.optional(),
  /** Filter groups, all of which must pass. */
  filters: z.array(filterGroup, { error: 'expected a list of filter groups' }).default(() => []),
  /**
   * The service keeps the set of assets it has announced to the webhook and
   * sends UNMATCHED when one stops passing its checks (docs/mirror.md).
   */
  mirror: z.boolean({ error: 'expected true or false' }).default(false),
});

/** A webhook, with `Unmatched` checked against `mirror` and dropped from eventTypes. */
export const webhook = webhookKeys
  .superRefine((value, context) => {
    if (!value.mirror && value.eventTypes.includes(null))
      context.addIssue({
        code: 'custom',
        path: ['eventTypes'],
        input: 'Unmatched',
        message: 'expected Unmatched only on a webhook with mirror: true (only mirror webhooks receive it)',
      });
    const missing = MIRROR_EVENT_TYPES.filter((type) => !value.eventTypes.includes(type));
    if (value.mirror && missing.length > 0)
      context.addIssue({
        code: 'custom',
        path: ['eventTypes'],
        // By their configuration names (Created), as the message names them, not the payload's (CREATED) the list holds here.
        input: value.eventTypes.map((type) => configName(type ?? 'UNMATCHED')),
        message: `expected the event types of a mirror webhook to include Created, Edited, Deleted and Purged (missing: ${missing
          .map(configName)
          .join(', ')})`,
      });
  })
  .transform(({ eventTypes, ...rest }) => ({
    ...rest,
    eventTypes: eventTypes.filter((type): type is EventType => type !== null),
  }));

/** `webhook-` + the first 12 hex digits of the SHA-256 of the url: the id of a webhook that sets none. */
export function defaultWebhookId(url: string): string {
  return `webhook-${createHash('sha256').update(url).digest('hex').slice(0, 12)}`;
}

/**
 * Two webhooks may not share an id, given or derived from the url. The
 * entries may be only partly valid here (the check runs even when other
 * entries are invalid): read them as unknown and skip what cannot have an id
 * yet.
 */
export function uniqueIds(entries: readonly unknown[], context: z.core.$RefinementCtx<unknown>): void {
  const seen = new Map<string, number>();
  entries.forEach((entry, index) => {
    if (entry === null || typeof entry !== 'object') return;
    const { id, url } = entry as { id?: unknown; url?: unknown };
    const effective =
      typeof id === 'string' ? id : id === undefined && typeof url === 'string' ? defaultWebhookId(url) : undefined;
    if (effective === undefined) return;
    const first = seen.get(effective);
    if (first === undefined) {
      seen.set(effective, index);
      return;
    }
    const derived = typeof id === 'string' ? '' : '; this one is derived from the url, set an id';
    context.addIssue({
      code: 'custom',
      path: [index, 'id'],
      input: effective,
      message: `expected a unique webhook id (webhooks[${first}] has the same${derived})`,
    });
  });
}
