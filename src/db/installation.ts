import type pg from 'pg';

/**
 * The random id of this installation, written once by the migration that
 * creates the schema (asset_webhooks.installation): two databases migrated
 * separately never share it. Signed deliveries carry it in `webhook-id`.
 */
export async function readInstallationId(client: pg.ClientBase | pg.Pool): Promise<string> {
  const { rows } = await client.query<{ installation_id: string }>(
    'select installation_id from asset_webhooks.installation',
  );
  if (rows.length !== 1)
    throw new Error(
      `asset_webhooks.installation: expected exactly one row (migrate writes it when it creates the schema), got ${rows.length}`,
    );
  return rows[0]!.installation_id;
}
