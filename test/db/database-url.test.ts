import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { redactUrl } from '../../src/db/connect.js';
import { runCli } from '../helpers/cli.js';
import { useTestDatabase } from '../helpers/test-database.js';

const db = useTestDatabase();

/** The test server's Unix socket directory, when it is the machine's PostgreSQL (embedded PostgreSQL listens on TCP only). */
const SOCKET_DIRECTORY = '/var/run/postgresql';
const server = new URL(db.url);
const socketListening = existsSync(`${SOCKET_DIRECTORY}/.s.PGSQL.${server.port || '5432'}`);

describe('every connection string form node-postgres reads is accepted by the commands', () => {
  const user = decodeURIComponent(server.username);
  const port = server.port || '5432';
  const forms = [
    `postgres://${user}@/${db.name}?host=${SOCKET_DIRECTORY}&port=${port}`,
    `postgresql://${user}@/${db.name}?host=${SOCKET_DIRECTORY}&port=${port}`,
    `POSTGRES://${user}@/${db.name}?host=${SOCKET_DIRECTORY}&port=${port}`,
    `postgres://${user}@${encodeURIComponent(SOCKET_DIRECTORY)}:${port}/${db.name}`,
    `socket:${SOCKET_DIRECTORY}?db=${db.name}&user=${user}&port=${port}`,
  ];

  it.skipIf(!socketListening).for(forms)('%s (over the Unix socket, real CLI)', async (url, { expect }) => {
    const result = await runCli(['dead-letters', '--json', '--database-url', url]);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual([]);
  });

  it.skipIf(!socketListening)('migrate too, which hands the string to graphile-worker', async () => {
    const result = await runCli(['migrate', '--database-url', forms[0]!]);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
  });

  it('also from DATABASE_URL, with the host and the password as parameters', async () => {
    // Embedded PostgreSQL asks for a password; the machine's server here trusts local connections.
    const password = server.password === '' ? '' : `&password=${server.password}`;
    const url = `postgres://${user}@/${db.name}?host=${encodeURIComponent(server.hostname)}&port=${port}${password}`;
    const result = await runCli(['dead-letters', '--json'], { env: { DATABASE_URL: url } });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
  });
});

describe('a password in the connection string is never printed', () => {
  const secret = 's3cret-db-pw';
  it.for([
    [`postgres://u:${secret}@127.0.0.1:1/db`, 'postgres://u:***@127.0.0.1:1/db'],
    [`postgres://u@127.0.0.1:1/db?password=${secret}`, 'postgres://u@127.0.0.1:1/db?password=***'],
    [
      `postgres://u@127.0.0.1:1/db?sslmode=disable&password=${secret}&application_name=x`,
      'postgres://u@127.0.0.1:1/db?sslmode=disable&password=***&application_name=x',
    ],
    [`postgres://u@127.0.0.1:1/db?pass%77ord=${secret}`, 'postgres://u@127.0.0.1:1/db?pass%77ord=***'],
    [`postgres://u@/db?host=/nonexistent&password=${secret}`, 'postgres://u@/db?host=/nonexistent&password=***'],
  ] as const)('%s (real CLI, database unreachable)', async ([url, shown], { expect }) => {
    const result = await runCli(['dead-letters', '--database-url', url]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(`database ${shown}: expected a reachable PostgreSQL server, got `);
    expect(result.stderr).not.toContain(secret);
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
  });

  it('a keyword/value string, which node-postgres does not read, is refused in one line without it', async () => {
    const result = await runCli(['dead-letters', '--database-url', `host=127.0.0.1 dbname=db password=${secret}`]);
    expect(result.code).toBe(1);
    expect(result.stderr).toBe(
      '--database-url: expected a URL such as postgres://user@host:5432/database or postgres://user@/database?host=/var/run/postgresql (from the option), got a keyword/value connection string, which node-postgres does not read: write it as a URL\n',
    );
  });

  it.each([
    [`host=db password=${secret} user=u`, 'host=db password=*** user=u'],
    [`host=db password = '${secret} x' user=u`, 'host=db password = *** user=u'],
    [`socket://u:${secret}@/run/pg?db=x`, 'socket://u:***@/run/pg?db=x'],
    [`postgres://u:p@ss:${secret}@host/db`, 'postgres://u:***@host/db'],
    [`postgres://u@host/db?sslpassword=${secret}`, 'postgres://u@host/db?sslpassword=***'],
  ])('masks %s for messages', (url, shown) => {
    expect(redactUrl(url)).toBe(shown);
  });
});
