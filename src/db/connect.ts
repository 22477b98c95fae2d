import pg from 'pg';
import { parse as parseConnectionString } from 'pg-connection-string';
import { parse as parseArray } from 'postgres-array';
import { UserError } from '../errors.js';

/**
 * bigint columns come back as JavaScript numbers, which hold integers exactly
 * only up to 2^53 - 1. That suffices for the service's own counters (seq,
 * payload and run ids, counts): they start at 1 and grow by one per event or
 * payload. Ids of the asset schema (asset, atom, parent, schema, type and
 * domain ids) may be anything a bigint holds, so every query that reads them
 * selects them as text (`::text`) and they stay decimal strings to the
 * receiver (DecimalId in src/interfaces.ts). A bigint read here beyond 2^53 is
 * refused rather than rounded: a silently changed id is worse than a failed query.
 */
pg.types.setTypeParser(pg.types.builtins.INT8, parseInt8);

/** A bigint as a number, or an error when no number holds it exactly. */
export function parseInt8(value: string): number {
  const number = Number(value);
  if (!Number.isSafeInteger(number)) {
    throw new RangeError(
      `bigint ${value}: expected a value within +-(2^53 - 1) to read as a number; a column that can hold larger values must be selected as text`,
    );
  }
  return number;
}
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

/**
 * The search_path of every session of the service. The asset database is
 * shared: another role that can create objects in a schema of the default
 * path (`public` on PostgreSQL 14 and before) could otherwise plant a function
 * that a call here resolves to (an exact argument type beats pg_catalog's
 * polymorphic one whatever the order) and have it run as the service's role.
 * Every name of the service's own objects is qualified; pg_temp comes last
 * so that a temporary table cannot shadow anything either. The functions of
 * asset_webhooks pin the same path themselves (sql/functions/README.md).
 */
export const SEARCH_PATH = 'pg_catalog, pg_temp';

/**
 * Sets SEARCH_PATH for the session: the first statement of every connection
 * the service opens. A SET rather than the startup option `-c search_path`,
 * which a `options` of the database URL would replace and which some
 * connection poolers refuse; a session-mode pooler keeps the setting with the
 * server connection the session is given.
 */
export async function pinSearchPath(client: pg.ClientBase): Promise<void> {
  await client.query(`set search_path = ${SEARCH_PATH}`);
}

/** A connection pool for one database URL, each of its sessions with SEARCH_PATH. The caller ends it. */
export function createPool(databaseUrl: string, options: { max?: number; applicationName?: string } = {}): pg.Pool {
  const pool = new pg.Pool({
    connectionString: databaseUrl,
    max: options.max ?? 10,
    application_name: options.applicationName ?? 'asset-webhooks',
    // Awaited by the pool before it hands the connection out.
    onConnect: pinSearchPath,
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
  'ENOENT',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'ENETRESET',
  '57P01',
  '57P02',
  '57P03',
  '57P05',
  '53300',
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
  return (
    CONNECTION_ERROR_CODES.has(code) ||
    code.startsWith('08') ||
    CONNECTION_LOST_MESSAGE.test(error.message) ||
    (error.cause !== undefined && error.cause !== error && isConnectionError(error.cause))
  );
}

/** The schemes node-postgres reads a connection string with (any case, as URL parsing lowers it). */
const DATABASE_URL_SCHEME = /^(postgres|postgresql|socket):/i;
/** A libpq keyword/value string (`host=... dbname=...`), which node-postgres does not read. */
const KEYWORD_VALUE = /^\s*[A-Za-z_]+\s*=/;

/**
 * The database URL from the option or DATABASE_URL, or a UserError naming
 * both. Accepted is what node-postgres connects with: a postgres:// or
 * postgresql:// URL (with or without a host: `postgres://user@/db?host=/run/postgresql`
 * names a socket directory), socket:/dir?db=name, and a bare socket directory.
 * The value is never echoed: it may hold a password.
 */
export function requireDatabaseUrl(option: string | undefined): string {
  const url = option ?? process.env.DATABASE_URL;
  if (!url) {
    throw new UserError(
      'database_url_missing',
      '--database-url: expected a PostgreSQL URL (or the environment variable DATABASE_URL), got nothing',
    );
  }
  const expected = `--database-url: expected a URL such as postgres://user@host:5432/database or postgres://user@/database?host=/var/run/postgresql (from ${option ? 'the option' : 'DATABASE_URL'})`;
  if (KEYWORD_VALUE.test(url)) {
    throw new UserError(
      'database_url_invalid',
      `${expected}, got a keyword/value connection string, which node-postgres does not read: write it as a URL`,
    );
  }
  if (url.startsWith('/')) return url;
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):/.exec(url)?.[1];
  if (!DATABASE_URL_SCHEME.test(url)) {
    throw new UserError(
      'database_url_invalid',
      `${expected}, got ${scheme ? `one with scheme ${scheme}:` : 'a value that is not a URL'}`,
    );
  }
  try {
    // What pg does with it on connecting; its errors do not repeat the input.
    parseConnectionString(url);
  } catch (error) {
    throw new UserError(
      'database_url_invalid',
      `${expected}, got one that node-postgres cannot read (${redactUrl(describeError(error))})`,
      { cause: error },
    );
  }
  return url;
}

/**
 * The connection string with every password in it replaced by ***, for
 * messages and logs: the password of user:password@, `password=` (and
 * `sslpassword=`) in the query, however its name is percent-encoded, and
 * `password=` of a keyword/value string. Works on text, so a string that is
 * not a valid URL is masked too.
 */
export function redactUrl(url: string): string {
  const userinfo = url.replace(/^([A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#@:]*:)[^/?#]*@/, '$1***@');
  const query = userinfo.replace(/([?&])([^&#=]*)=([^&#]*)/g, (whole, separator: string, name: string) =>
    /password/i.test(decodeName(name)) ? `${separator}${name}=***` : whole,
  );
  return query.replace(/(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&#]*)/gi, '$1***');
}

function decodeName(name: string): string {
  try {
    return decodeURIComponent(name.replace(/\+/g, ' '));
  } catch {
    return name;
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
    return code && !error.message.includes(String(code))
      ? `${error.message} (${String(code)})`
      : error.message || error.name;
  }
  return String(error);
}
