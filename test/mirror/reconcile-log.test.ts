import { Writable } from 'node:stream';
import pino from 'pino';
import { expect, it } from 'vitest';
import { changedMirrors, queueReconciles, runQueuedReconcile } from '../../src/mirror/auto-reconcile.js';
import { webhook } from '../helpers/assets.js';
import { resetData } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';

const db = useTestDatabase();

/** A logger whose JSON lines are kept. */
function capturingLogger(): { logger: pino.Logger; lines: () => Array<Record<string, unknown>> } {
  let text = '';
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      text += chunk.toString();
      done();
    },
  });
  return {
    logger: pino({ level: 'info' }, stream),
    lines: () =>
      text
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => JSON.parse(line) as Record<string, unknown>),
  };
}

async function queuedPayload(): Promise<unknown> {
  const { rows } = await db.pool.query<{ payload: unknown }>(
    `select j.payload from graphile_worker._private_jobs j join graphile_worker._private_tasks t on t.id = j.task_id
     where t.identifier = 'reconcile'`,
  );
  expect(rows).toHaveLength(1);
  return rows[0]!.payload;
}

it("the reconcile a reload queues says, when it starts, which of the webhook's checks the reload changed", async () => {
  await resetData(db.pool);
  await db.pool.query('truncate asset_webhooks.mirror_members, asset_webhooks.reconciles');
  const before = webhook('id: copy, mirror: true, filters: [{ filterKind: keywords, condition: ANY, value: [shop] }]');
  const after = webhook(
    'id: copy, mirror: true, resourceTypes: [Resource, Project], filters: [{ filterKind: keywords, condition: ANY, value: [shop] }, ' +
      '{ filterKind: parentId, condition: ANY, value: ["null", "7"] }]',
  );
  await queueReconciles(db.pool, changedMirrors([before], [after]));
  const { logger, lines } = capturingLogger();
  const result = await runQueuedReconcile({
    pool: db.pool,
    logger,
    webhooks: [after],
    maxPayloadBytes: 1 << 20,
    requestedBy: 'run test',
    payload: await queuedPayload(),
  });
  expect(result).not.toBeNull();
  expect(lines().find((line) => String(line.msg).startsWith('reconcile started'))).toMatchObject({
    webhook: 'copy',
    changed: ['resource types', 'parent rule'],
    msg: "reconcile started: the webhook's resource types and parent rule changed",
  });
});

it('a reconcile queued again after its process died says it resumes; one queued by an older release, that checks changed', async () => {
  const copy = webhook('id: copy, mirror: true, filters: [{ filterKind: keywords, condition: ANY, value: [shop] }]');
  const cases = [
    {
      payload: { webhookId: 'copy', changed: [] },
      changed: [],
      msg: 'reconcile started: resuming a reconcile whose process stopped',
    },
    { payload: { webhookId: 'copy' }, changed: null, msg: "reconcile started: the webhook's checks changed" },
  ];
  for (const { payload, changed, msg } of cases) {
    const { logger, lines } = capturingLogger();
    await runQueuedReconcile({
      pool: db.pool,
      logger,
      webhooks: [copy],
      maxPayloadBytes: 1 << 20,
      requestedBy: 'run test',
      payload,
    });
    expect(lines().find((line) => String(line.msg).startsWith('reconcile started'))).toMatchObject({ changed, msg });
  }
});
