import type { Server } from 'node:http';
import type { Logger } from 'pino';

export interface ServiceOptions {
  readonly databaseUrl: string;
  readonly configPath: string;
  readonly logger: Logger;
  /** Serve /livez, /readyz, /healthz and /metrics on this port. */
  readonly httpPort?: number | undefined;
  /** The address the HTTP server listens on. Default: every interface. */
  readonly httpHost?: string | undefined;
  /** graphile-worker jobs (coalescing runs, maintenance) this process runs at once. Default 4. */
  readonly concurrency?: number | undefined;
  /** Connections of the process's own pool (see connectionBudget). Default 12. */
  readonly databasePoolSize?: number | undefined;
  /** V8's heap growth as `run` set it (see limitHeapGrowth), told in the line that says the service runs. */
  readonly heapGrowingPercent?: number | null | undefined;
}

export interface RunningService {
  /** Stop taking work, let in-flight deliveries and jobs finish, release everything. */
  stop(): Promise<void>;
  /** Reload the configuration; an invalid document keeps the old one. Returns whether it was applied. */
  reload(): Promise<boolean>;
  /**
   * Resolves when the worker stops: with null after stop(), with the cause
   * when graphile-worker stopped by itself (a fatal error of its own).
   */
  readonly stopped: Promise<Error | null>;
  readonly httpServer: Server | undefined;
}
