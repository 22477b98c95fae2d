import type { Command } from 'commander';
import { loadConfiguredWebhook } from '../../config/load.js';
import { withDatabase } from '../database.js';
import { UserError } from '../../errors.js';
import { explainWebhook } from '../../filters/explain.js';
import { readAssetState } from '../../db/asset-state.js';
import { EVENT_TYPES, type EventType } from '../../interfaces.js';
import { stringifyWithExactIds } from '../json-output.js';
import { parseDecimalIdOption } from '../options.js';
import { assertBinding } from '../../migrate/binding-check.js';
import { viewHasInTrash } from '../../coalesce/claim.js';
import { printableValues, quotedPrefix } from '../../text/printable.js';
import { UsageError } from '../usage-error.js';
import type pg from 'pg';
import type { WebhookConfig } from '../../config/schema.js';
import type { AssetState } from '../../interfaces.js';

function parseEventType(value: string): EventType {
  const type = EVENT_TYPES.find((candidate) => candidate === value.toUpperCase());
  if (!type)
    throw new UsageError(
      `--event-type: expected one of Created, Edited, Deleted, Purged, Reversion, got ${quotedPrefix(value)}`,
    );
  return type;
}

export function registerExplain(program: Command): void {
  program
    .command('explain')
    .description(
      "Evaluate a webhook's checks against an asset's current state and say which check passes or excludes it.",
    )
    .requiredOption('--webhook <id>', 'webhook id')
    .requiredOption('--asset <assetId>', 'asset id', parseDecimalIdOption('--asset'))
    .option('--event-type <type>', 'event type to evaluate', parseEventType, 'EDITED' as EventType)
    .option('--json', 'machine-readable output')
    .option('--database-url <url>', 'PostgreSQL URL (default: env DATABASE_URL)')
    .option('--config <file>', 'configuration document (default: env ASSET_WEBHOOKS_CONFIG)')
    .action(
      async (options: {
        webhook: string;
        asset: string;
        eventType: EventType;
        json?: boolean;
        databaseUrl?: string;
        config?: string;
      }) => {
        const { webhook } = await loadConfiguredWebhook(options.config, options.webhook);
        await withDatabase(options.databaseUrl, async (pool) => {
          // Without a (valid) binding there is no asset state to read: say so in one line.
          await assertBinding(pool);
          const assetState = await readAssetState(pool, options.asset);
          if (!assetState)
            throw new UserError(
              'unknown_asset',
              `--asset: expected an existing asset id, got ${options.asset} (no such asset in asset_webhooks.asset_state)`,
            );
          const evaluated = explainWebhook(
            webhook,
            options.eventType,
            assetState,
            await isInTrash(pool, options.asset),
          );
          const mirror = webhook.mirror ? await mirrorState(pool, webhook, assetState) : undefined;
          if (options.json) {
            // The asset as the filters saw it, so a reader can check every comparison.
            process.stdout.write(`${stringifyWithExactIds({ ...evaluated, asset: assetState, mirror })}\n`);
            return;
          }
          // Keywords, field values and filter values, escaped for the terminal.
          const explanation = printableValues(evaluated);
          const asset = printableValues(assetState);
          const out = [
            `webhook ${webhook.id}, asset ${asset.assetId} (${asset.supertype}, ${asset.assetUuid}), event ${options.eventType}:`,
          ];
          for (const check of explanation.checks)
            out.push(`  ${check.verdict.padEnd(7)} ${check.check.padEnd(14)} ${check.detail}`);
          out.push(explanation.delivered ? '=> delivered' : `=> excluded by ${explanation.excludedBy}`);
          if (mirror !== undefined) out.push(mirrorLine(mirror));
          process.stdout.write(`${out.join('\n')}\n`);
        });
      },
    );
}

/** Whether the asset is in the Trash, as the coalescer reads it (false when the binding's view has no in_trash). */
async function isInTrash(pool: pg.Pool, assetId: string): Promise<boolean> {
  if (!(await viewHasInTrash(pool))) return false;
  const { rows } = await pool.query<{ in_trash: boolean | null }>(
    'select s.in_trash from asset_webhooks.asset_state s where s.asset_id = $1::bigint',
    [assetId],
  );
  return rows[0]?.in_trash === true;
}

/** What a mirror webhook's set says of the asset (docs/mirror.md). */
interface MirrorState {
  readonly member: boolean;
  /** The eventTimestamp last sent for the asset to any mirror webhook; null when nothing was. */
  readonly lastEventAt: string | null;
  /** The check that leaves the asset out of the set now (as an EDITED of it), or null. */
  readonly leavingCheck: string | null;
}

async function mirrorState(pool: pg.Pool, webhook: WebhookConfig, asset: AssetState): Promise<MirrorState> {
  const {
    rows: [row],
  } = await pool.query<{ member: boolean; last_event_at: Date }>(
    'select $1 = any(webhooks) as member, last_event_at from asset_webhooks.mirror_members where asset_id = $2',
    [webhook.id, asset.assetId],
  );
  return {
    member: row?.member ?? false,
    lastEventAt: row?.last_event_at.toISOString() ?? null,
    leavingCheck: explainWebhook(webhook, 'EDITED', asset).excludedBy,
  };
}

function mirrorLine(state: MirrorState): string {
  if (!state.member)
    return `mirror: not in the webhook's set${state.lastEventAt === null ? ' (never sent)' : ` (left it; last event ${state.lastEventAt})`}`;
  return state.leavingCheck === null
    ? `mirror: in the webhook's set (last event ${state.lastEventAt})`
    : `mirror: in the webhook's set (last event ${state.lastEventAt}), but excluded by ${state.leavingCheck}: its next event is sent as UNMATCHED, or a reconcile sends one`;
}
