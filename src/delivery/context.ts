import type pg from 'pg';
import type { Logger } from 'pino';
import type { SecretResolver } from '../secrets/types.js';
import type { AttemptResult } from './attempt-store.js';
import type { HttpSender } from './http/sender.js';
import type { Completer } from './completer.js';

/** What delivery needs of one configured webhook. */
export interface DeliveryWebhook {
  readonly id: string;
  readonly url: string;
  readonly enabled: boolean;
  /** Paused: its payloads are not sent (an attempt already started finishes). Default false. */
  readonly paused?: boolean | undefined;
  readonly apikey?: string | undefined;
  readonly headers?: Readonly<Record<string, string>> | undefined;
  /** Standard Webhooks signing: `secret` names a secret holding one or more `whsec_` keys. */
  readonly signing?: { readonly secret: string } | undefined;
}

export interface DeliverySettings {
  readonly delaysSeconds: readonly number[];
  readonly deadLetterAfterSeconds: number;
  /** 4xx codes retried like a 5xx (retry.retryStatusCodes). */
  readonly retryStatusCodes: readonly number[];
  /** retry.honorRetryAfter: a retried response's Retry-After lengthens the next delay. Default false. */
  readonly honorRetryAfter?: boolean | undefined;
  /** retry.disableOnGone: a 410 suspends the webhook instead of dead-lettering the payload. Default false. */
  readonly disableOnGone?: boolean | undefined;
  /** requestTimeoutSeconds: how long a live process's request may last. */
  readonly requestTimeoutSeconds: number;
  /** maxRequestsInFlight: this process's cap over all webhooks. */
  readonly maxRequestsInFlight: number;
}

/** Everything a delivery attempt talks to; the service builds it once, and it reads the current configuration. */
export interface DeliveryContext {
  readonly pool: pg.Pool;
  /** This installation's random id (asset_webhooks.installation), part of every payload's `webhook-id`. */
  readonly installationId: string;
  /** Writes payloads' next states, several per statement when busy, and records standbys sent. */
  readonly completer: Pick<Completer, 'settle' | 'markSent'>;
  readonly sender: Pick<HttpSender, 'post'>;
  readonly secrets: SecretResolver;
  webhook(id: string): DeliveryWebhook | undefined;
  settings(): DeliverySettings;
  readonly logger: Logger;
  /** Told of every finished attempt (metrics). */
  onAttempt?(webhookId: string, result: AttemptResult): void;
  /** Told of every claim statement's end, with how many payloads it claimed (metrics). */
  onClaim?(claimed: number): void;
  /** Told of every crash-recovery and expiry sweep's end (metrics). */
  onSweep?(outcome: 'completed' | 'failed'): void;
  /** Aborted when the service stops: results still unwritten then get ten more seconds. */
  readonly stopping?: AbortSignal;
}
