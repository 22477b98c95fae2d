import type pg from 'pg';
import { readRoutineDigest } from '../migrate/routines.js';
import { readSchemaVersion } from '../migrate/migrate.js';
import { codeSchemaVersion, loadRoutineFiles, routineDigest } from '../migrate/sql-files.js';

/** The schema a process found in the database, against its own code's. */
export interface SchemaFound {
  readonly databaseVersion: number;
  readonly databaseFunctions: string | null;
  readonly codeVersion: number;
  readonly codeFunctions: string;
}

/** One line for the log and /readyz: what was found, and what happens now. */
export function describeMove(found: SchemaFound): string {
  return (
    `schema asset_webhooks is at version ${found.databaseVersion} with functions ${found.databaseFunctions ?? 'none'}, ` +
    `not this release's version ${found.codeVersion} with functions ${found.codeFunctions}: ` +
    'this process has stopped claiming and coalescing, finishes its deliveries in flight and waits for SIGTERM; ' +
    'a newer release must take over (docs/upgrading.md)'
  );
}

export interface SchemaWatchOptions {
  readonly pool: pg.Pool;
  /** How often the schema is read when nothing else asked. Default 5,000 ms. */
  readonly intervalMs?: number;
  /** Called once, when the database's schema version or functions are no longer this code's. */
  onMoved(found: SchemaFound): void;
}

export interface SchemaWatch {
  /**
   * Reads the schema now (or right after the read under way): when `migrate`
   * notifies, or a failed SQL call may mean it moved. Resolves once that read
   * has decided (never rejects: a failed read decides nothing).
   */
  check(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Watches for `migrate` of another release moving the schema past this
 * process, which checked it at start (assertSchemaCurrent): a newer migration
 * applied, or function files that are not this code's. It reads the
 * version and the functions' digest every intervalMs and when asked
 * (check): the service asks when `migrate` notifies SCHEMA_CHANGED_CHANNEL
 * after it commits (heard by the delivery pump's listening connection) and
 * when a claim fails.
 * A read that fails (the database away) decides nothing; the next one does.
 */
export function watchSchema(options: SchemaWatchOptions): SchemaWatch {
  const codeVersion = codeSchemaVersion();
  const codeFunctions = routineDigest(loadRoutineFiles());
  let reading: Promise<void> | undefined;
  let again = false;
  let moved = false;
  let stopped = false;

  const read = async (): Promise<void> => {
    do {
      again = false;
      try {
        const [databaseVersion, databaseFunctions] = await Promise.all([
          readSchemaVersion(options.pool),
          readRoutineDigest(options.pool),
        ]);
        if (stopped || moved) return;
        if (databaseVersion !== codeVersion || databaseFunctions !== codeFunctions) {
          moved = true;
          options.onMoved({ databaseVersion, databaseFunctions, codeVersion, codeFunctions });
          return;
        }
      } catch {
        // The database away: the pool's users report it; the next read decides.
      }
    } while (again && !stopped);
  };

  const check = (): Promise<void> => {
    if (stopped || moved) return Promise.resolve();
    if (reading) {
      again = true;
      return reading;
    }
    reading = read().finally(() => {
      reading = undefined;
    });
    return reading;
  };

  const timer = setInterval(() => void check(), options.intervalMs ?? 5000);
  return {
    check,
    async stop() {
      stopped = true;
      clearInterval(timer);
      await reading;
    },
  };
}
