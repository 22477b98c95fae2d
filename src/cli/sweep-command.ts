import type pg from 'pg';
import { loadConfiguredWebhook } from '../config/load.js';
import type { WebhookConfig } from '../config/schema.js';
import { BINDING_VIEW_COLUMNS } from '../db/asset-state.js';
import { assertBinding } from '../migrate/binding-check.js';
import type { SweepKind } from '../sweep/lock.js';
import type { SweepOutcome } from '../sweep/sweep.js';
import { printableValues } from '../text/printable.js';
import { withDatabase } from './database.js';
import { stopOnSignals } from './stop-signals.js';

/** Assets read between two progress lines. */
const PROGRESS_EVERY = 10_000;

/** The options every sweep command takes. */
export interface SweepCommandOptions {
  readonly webhook: string;
  readonly dryRun?: boolean;
  readonly json?: boolean;
  readonly databaseUrl?: string;
  readonly config?: string;
}

/** What every sweep is given by its command. */
export interface SweepContext<Progress> {
  readonly pool: pg.Pool;
  readonly webhook: WebhookConfig;
  readonly maxPayloadBytes: number;
  readonly dryRun: boolean;
  readonly signal: AbortSignal;
  readonly onProgress: (progress: Progress) => void;
}

/** What a sweep command (backfill, reconcile) supplies: which webhooks it takes, how it runs the sweep, how it words its lines. */
export interface SweepCommand<
  Progress extends { readonly assetsRead: number },
  Result extends Progress & SweepOutcome & { readonly webhookId: string },
> {
  readonly kind: SweepKind;
  /** Refuses, with a UserError, a webhook the sweep cannot serve. */
  refuse(webhook: WebhookConfig): void;
  /** Warnings on stderr, once the database is reached, before the sweep starts. */
  warn(pool: pg.Pool, webhook: WebhookConfig): Promise<void>;
  sweep(context: SweepContext<Progress>): Promise<Result>;
  /** One progress line, also the first line of the summary. */
  progressLine(webhookId: string, progress: Progress, dryRun: boolean): string;
  /** The summary's lines between the first and the last. */
  details(result: Result): string[];
  /** What a resumed sweep continued, as the summary names it: `an interrupted …`. */
  readonly resumedWhat: string;
  /** The last line of the summary of a completed sweep: what happens next. */
  readonly completedLine: string;
  /** The result as --json prints it. Default: the result itself. */
  jsonOf?(result: Result): object;
  /** Called once the result is printed. */
  printed?(result: Result): void;
}

/**
 * Runs a sweep command: progress lines on stderr every 10,000 assets read,
 * the result on stdout, and its exit status. The first SIGINT or SIGTERM
 * stops the sweep after the chunk in progress commits and the command exits
 * 130 or 143, never 1, which says the command was given something wrong; a
 * second ends the process at once. A sweep left unfinished otherwise exits 1.
 */
export async function runSweepCommand<
  Progress extends { readonly assetsRead: number },
  Result extends Progress & SweepOutcome & { readonly webhookId: string },
>(options: SweepCommandOptions, command: SweepCommand<Progress, Result>): Promise<void> {
  const { config, webhook } = await loadConfiguredWebhook(options.config, options.webhook);
  command.refuse(webhook);
  const dryRun = options.dryRun === true;
  const stop = stopOnSignals(command.kind, 'stopping after the current chunk commits');
  let printed = 0;
  const onProgress = (progress: Progress): void => {
    if (Math.floor(progress.assetsRead / PROGRESS_EVERY) <= printed) return;
    printed = Math.floor(progress.assetsRead / PROGRESS_EVERY);
    process.stderr.write(`${command.progressLine(webhook.id, progress, dryRun)}\n`);
  };
  const result = await withDatabase(options.databaseUrl, async (pool) => {
    // in_trash too: a sweep sends only assets that are not in the Trash.
    await assertBinding(pool, BINDING_VIEW_COLUMNS);
    await command.warn(pool, webhook);
    const { maxPayloadBytes } = config.assetUpdater;
    return command.sweep({ pool, webhook, maxPayloadBytes, dryRun, signal: stop.signal, onProgress });
  }).finally(() => stop.release());
  process.stdout.write(
    `${options.json === true ? JSON.stringify(command.jsonOf?.(result) ?? result) : summary(command, printableValues(result))}\n`,
  );
  command.printed?.(result);
  if (result.status !== 'completed' && (stop.exitCode !== undefined || !dryRun)) process.exitCode = stop.exitCode ?? 1;
}

function summary<
  Progress extends { readonly assetsRead: number },
  Result extends Progress & SweepOutcome & { readonly webhookId: string },
>(command: SweepCommand<Progress, Result>, result: Result): string {
  const lines = [command.progressLine(result.webhookId, result, result.dryRun), ...command.details(result)];
  if (result.resumed) lines.push(`  ${result.dryRun ? 'a run would resume' : 'resumed'} ${command.resumedWhat}`);
  lines.push(
    result.dryRun
      ? '  dry run: nothing changed'
      : result.status === 'completed'
        ? `  ${command.completedLine}`
        : '  interrupted: run the same command again to resume',
  );
  return lines.join('\n');
}
