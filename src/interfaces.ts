/**
 * Glossary
 *
 * - **asset**: a row of the DAM's asset tables, seen through a binding.
 * - **binding**: SQL that connects one asset schema to the outbox: capture
 *   triggers and the view asset_webhooks.asset_state (sql/bindings/).
 * - **outbox**: asset_webhooks.outbox, one row per captured change, written in
 *   the transaction of the change.
 * - **event**: one change of one asset; its eventId is assigned at capture.
 * - **coalescing run**: one pass over the outbox: claim, collapse, route, pack.
 * - **collapse**: the EDITED events of one asset in one run become the latest one;
 *   the others get the outcome `collapsed`.
 * - **route**: the decision for one event and one webhook: a payload, or the
 *   named check that excluded it.
 * - **payload**: one POST body (at most batchSize events and maxPayloadBytes),
 *   stored so that every attempt sends the same bytes.
 * - **attempt**: one POST of a payload; a **series** is the attempts from
 *   creation (series 1) or from an operator's redelivery (series 2, ...).
 * - **dead letter**: a payload that will not be attempted again: `rejected`
 *   (4xx), `retries_exhausted`, `expired`, `too_large`, or `webhook_removed`
 *   (its webhook left the configuration of every running `run` process).
 */

/** Event types as they appear in payloads. */
export const EVENT_TYPES = ['CREATED', 'EDITED', 'DELETED', 'PURGED', 'REVERSION'] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/**
 * The type an event is sent as: its own, or UNMATCHED, which only a mirror
 * webhook receives (in place of the exclusion of an event of an asset in its
 * set, or from a reconcile): the asset left the set of what the webhook gets.
 */
export type SentEventType = EventType | 'UNMATCHED';

/**
 * A bigint of the asset schema (an asset, atom, parent, schema, type or domain
 * id) as PostgreSQL prints it: decimal digits, `-` before a negative one. Exact
 * for every bigint, where a JavaScript number is exact only up to 2^53 - 1; in a
 * payload it is written as a JSON number with these very digits.
 */
export type DecimalId = string;

/**
 * The current state of an asset as the filters see it: one row of the
 * binding's view asset_webhooks.asset_state.
 */
export interface AssetState {
  readonly assetId: DecimalId;
  readonly assetUuid: string;
  /** Resource, Project, Adaptation, Template, ... */
  readonly supertype: string;
  /** null for a top-level asset. */
  readonly parentId: DecimalId | null;
  readonly state: string | null;
  readonly schemaId: DecimalId | null;
  readonly typeId: DecimalId | null;
  readonly domainId: DecimalId | null;
  readonly latestAtomId: DecimalId | null;
  readonly keywords: readonly string[];
  /** Parallel to fieldValues: one entry per additional field value. */
  readonly fieldNames: readonly string[];
  readonly fieldValues: readonly string[];
}

/**
 * The checks that can exclude an event from a webhook, in the spec's order
 * (resource type, event type, parent, then the filter groups), as named in
 * asset_webhooks.event_outcomes.excluded_by.
 * `filter:<n>` counts the webhook's filter groups from 1; `asset_gone` and
 * `in_trash` (an EDITED or REVERSION of an asset in the Trash) are decided by
 * the coalescer, for every webhook, before the filters run.
 */
export type ExclusionCheck =
  'disabled' | 'resource_type' | 'event_type' | 'parent' | `filter:${number}` | 'asset_gone' | 'in_trash';

/** Reasons a payload is dead-lettered. */
export type DeadLetterReason = 'rejected' | 'retries_exhausted' | 'expired' | 'too_large' | 'webhook_removed';
