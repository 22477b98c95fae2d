import type { TestProject } from 'vitest/node';
import { createPool } from '../../src/db/connect.js';
import { migrate } from '../../src/migrate/migrate.js';
import { findTestServer } from './find-server.js';
import { databaseUrlFor } from '../helpers/database-url.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** URL of the server's maintenance database (for CREATE DATABASE). */
    serverUrl: string;
    /** A database migrated with the reference binding, cloned for every test file. */
    templateDatabase: string;
  }
}

/**
 * Finds a server, migrates a template database once (with the reference
 * binding), and hands both to the test files. The template and an embedded
 * server are removed when the run ends, whether the tests passed or not.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const server = await findTestServer();
  const templateDatabase = `aw_template_${process.pid}_${Date.now().toString(36)}`;
  const admin = createPool(server.url, { max: 1 });
  await admin.query(`create database ${templateDatabase}`);
  const templateUrl = databaseUrlFor(server.url, templateDatabase);
  const pool = createPool(templateUrl, { max: 2 });
  try {
    await migrate(pool, { binding: 'reference' });
  } finally {
    await pool.end();
  }
  process.stdout.write(`test database server: ${server.kind}\n`);
  project.provide('serverUrl', server.url);
  project.provide('templateDatabase', templateDatabase);

  let tornDown = false;
  const teardown = async (): Promise<void> => {
    if (tornDown) return;
    tornDown = true;
    try {
      await admin.query(`drop database if exists ${templateDatabase} with (force)`);
    } finally {
      await admin.end();
      await server.stop();
    }
  };
  return teardown;
}
