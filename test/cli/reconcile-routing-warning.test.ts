import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { routedWebhooks } from '../../src/coalesce/routed-webhooks.js';
import { parseConfigText } from '../../src/config/load.js';
import { runCli } from '../helpers/cli.js';
import { registerWebhooks, resetData, runCoalesce } from '../helpers/seed.js';
import { useTempDirectories } from '../helpers/temp-directories.js';
import { useTestDatabase } from '../helpers/test-database.js';

const db = useTestDatabase();
const tempDirectory = useTempDirectories();
const directory = tempDirectory('aw-reconcile-routing-');

/** A document with the mirror webhook `copy` filtering on one keyword. */
function documentWith(keyword: string): string {
  return stringify({
    assetUpdater: {
      network: { allowPrivateAddresses: true },
      webhooks: [
        { id: 'other', url: 'http://127.0.0.1:9/other', enabled: true },
        {
          id: 'copy',
          url: 'http://127.0.0.1:9/copy',
          enabled: true,
          mirror: true,
          filters: [{ filterKind: 'keywords', condition: 'ANY', value: [keyword] }],
        },
      ],
    },
  });
}

function file(name: string, text: string): string {
  const written = path.join(directory, name);
  writeFileSync(written, text);
  return written;
}

beforeAll(async () => {
  await resetData(db.pool);
  // The running service's document: coalescing records the routing it routes by.
  const service = routedWebhooks(parseConfigText(documentWith('summer'), 'service.yaml').assetUpdater.webhooks);
  await registerWebhooks(db.pool, service);
  await db.pool.query('insert into assets (asset_id) values (1)');
  await runCoalesce(db.pool, service);
});

/** `reconcile --webhook copy --dry-run` with the document `config`, as a child process. */
function dryRunReconcile(config: string): ReturnType<typeof runCli> {
  return runCli(['reconcile', '--webhook', 'copy', '--dry-run', '--config', config, '--database-url', db.url]);
}

describe('reconcile --config with other checks than the running service', () => {
  it('warns in one line on stderr naming the webhook when its filters differ from the last routing', async () => {
    const other = file('winter.yaml', documentWith('winter'));
    const { code, stderr } = await dryRunReconcile(other);
    expect(code).toBe(0);
    const warnings = stderr.split('\n').filter((line) => line.includes('warning'));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(
      /^reconcile: warning: webhook copy: its checks in this document .* differ from those the service last routed it by/,
    );
  });

  it('says nothing when the checks are those the service routes by', async () => {
    const same = file('summer.yaml', documentWith('summer'));
    const { code, stderr } = await dryRunReconcile(same);
    expect(code).toBe(0);
    expect(stderr).not.toContain('warning');
  });
});
