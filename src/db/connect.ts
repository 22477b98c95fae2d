import pg from 'pg';
import { parse as parseArray } from 'postgres-array';
import { UserError } from '../errors.js';

// bigint columns (ids, seq) come back as JS numbers: they stay far below 2^53.
pg.types.setTypeParser(pg.types.builtins.INT8, (value) => Number(value));
// Arrays of strings (an asset's keywords and fields, a payload's eventIds):
// postgres-array 3 instead of pg 8's postgres-array 2, which allocated an
// object for every character, so that its garbage was a sixth of what
// coalescing allocated. Same values; see the test of the parsers.
/** text[], varchar[] and uuid[]. */
export const STRING_ARRAY_OIDS = [1009, 1015, 2951] as const;
// pg's typings list only the scalar builtins; any type's OID is accepted.
const setParser = pg.types.setTypeParser as (oid: number, parse: (value: string) => unknown) => void;
for (const oid of STRING_ARRAY_OIDS) setParser(oid, (value) => parseArray(value));

/**
 * TCP keepalive after 10 s without traffic, on every connection: a NAT or
 * load balancer between the service and the database forgets connections
 * idle for some minutes (AWS NLB 350 s, Azure 4 min) without telling either
 * side, and a process whose pooled connections were dropped that way waits
 * on them (a query, or the goodbye of a stop) with no end. Probes keep such
 * devices' state fresh. The system's default wait before the first probe is
 * two hours.
 */
export const KEEPALIVE = { keepAlive: true, keepAliveInitialDelayMillis: 10_000 } as const;

/** A connection pool for one database URL. The caller ends it. */
export function createPool(databaseUrl: string, options: { max?: number; applicationName?: string } = {}): pg.Pool {
  const pool = new pg.Pool({
    connectionString: databaseUrl,
    max: options.max ?? 10,
    application_name: options.applicationName ?? 'asset-webhooks',
    ...KEEPALIVE,
  });
  // A client that loses its connection (idle in the pool, or checked out by
  // graphile-worker between queries) must not crash the process: the next
  // query on it or on the pool reports the problem where it can be handled.
  pool.on('error', () => {});
  pool.on('connect', (client) => client.on('error', () => {}));
  return pool;
}

/**
 * Error codes that mean the server could not be reached or the session was
 * lost: Node's socket and resolver errors (ENOENT is a Unix socket whose
 * server is down; ENOTFOUND and EAI_AGAIN a name that does not resolve for a
 * moment, as during a failover) and PostgreSQL's admin shutdown, crash
 * shutdown, cannot connect now, idle session timeout and too many
 * connections. SQLSTATE class 08 (connection exception) is matched by prefix.
 */
const CONNECTION_ERROR_CODES = new Set([
  'ENOENT', 'ENOTFOUND', 'EAI_AGAIN', 'ECONNREFUSED', 'ECONNRESET', 'ECONNABORTED', 'EPIPE', 'ETIMEDOUT',
  'EHOSTUNREACH', 'EHOSTDOWN', 'ENETUNREACH', 'ENETDOWN', 'ENETRESET',
  '57P01', '57P02', '57P03', '57P05', '53300',
]);

/** What pg says, without a code, when a connection ends or cannot be used. */
const CONNECTION_LOST_MESSAGE =
  /^Connection terminated|^Client has encountered a connection error|^Client was closed|^timeout exceeded when trying to connect|^Connection ended/;

/**
 * Whether an error says the database could not be reached or the connection
 * was lost (rather than that a statement was wrong): worth trying again once
 * the server is back. Looks through AggregateError (every address of a name
 * refused) and `cause`.
 */
export function isConnectionError(error: unknown): boolean {
  if (error instanceof AggregateError) return error.errors.some(isConnectionError);
  if (!(error instanceof Error)) return false;
  const code = String((error as { code?: unknown }).code ?? '');
  return CONNECTION_ERROR_CODES.has(code) || code.startsWith('08') || CONNECTION_LOST_MESSAGE.test(error.message)
    || (error.cause !== undefined && error.cause !== error && isConnectionError(error.cause));
}

/** The database URL from the option or DATABASE_URL, or a UserError naming both. */
export function requireDatabaseUrl(option: string | undefined): string {
  const url = option ?? process.env.DATABASE_URL;
  if (!url) {
    throw new UserError('database_url_missing', '--database-url: expected a PostgreSQL URL (or the environment variable DATABASE_URL), got nothing');
  }
  // The value is not echoed: it may hold a password.
  const protocol = URL.canParse(url) ? new URL(url).protocol : undefined;
  // pg also reads socket:/dir?db=name and a bare socket directory.
  if (!url.startsWith('/') && protocol !== 'postgres:' && protocol !== 'postgresql:' && protocol !== 'socket:') {
    throw new UserError('database_url_invalid',
      `--database-url: expected a URL such as postgres://user@host:5432/database (from ${option ? 'the option' : 'DATABASE_URL'}), got ${protocol ? `one with scheme ${protocol}` : 'a value that is not a URL'}`);
  }
  return url;
}

/** The URL with any password replaced, for messages and logs. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return '<unparseable url>';
  }
}

/** Checks that the database answers, turning a connection failure into a UserError. */
export async function assertReachable(pool: pg.Pool, databaseUrl: string): Promise<void> {
  try {
    await pool.query('select 1');
  } catch (error) {
    throw new UserError(
      'database_unreachable',
      `database ${redactUrl(databaseUrl)}: expected a reachable PostgreSQL server, got ${describeError(error)}`,
      { cause: error },
    );
  }
}

/** A one-line description of an error without its stack. */
export function describeError(error: unknown): string {
  if (error instanceof AggregateError && error.errors.length > 0) return describeError(error.errors[0]);
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    return code && !error.message.includes(String(code)) ? `${error.message} (${String(code)})` : error.message || error.name;
  }
  return String(error);
}
