import type pg from 'pg';

const KEYWORDS = ['summer', 'winter', 'campaign', 'product', 'archive'];
const STATES = ['draft', 'review', 'approved'];

/**
 * Simulated DAM activity through the reference schema: creations (resources,
 * projects and child assets), bursts of edits, new versions, trash and restore,
 * and purges. One step every `everyMs` until stopped.
 */
export class DemoActivity {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> = Promise.resolve();
  private step = 0;
  /** Statements that failed (shown on the dashboard; the demo goes on). */
  errors = 0;

  constructor(
    private readonly pool: pg.Pool,
    private readonly random: () => number = Math.random,
  ) {}

  start(everyMs: number): void {
    this.timer = setInterval(() => {
      this.running = this.running
        .then(() => this.once())
        .catch(() => {
          this.errors += 1;
        });
    }, everyMs);
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.running;
  }

  private pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.random() * items.length)]!;
  }

  private async anyAsset(where = 'true'): Promise<number | null> {
    const { rows } = await this.pool.query<{ asset_id: number }>(
      `select asset_id from public.assets where ${where} order by random() limit 1`,
    );
    return rows[0]?.asset_id ?? null;
  }

  async once(): Promise<void> {
    this.step += 1;
    const roll = this.random();
    if (this.step <= 5 || roll < 0.3) {
      await this.create();
    } else if (roll < 0.55) {
      const id = await this.anyAsset('trashed_at is null');
      if (id === null) return;
      // A burst of edits: they collapse into one EDITED.
      for (let i = 0; i < 3; i += 1) {
        await this.pool.query('update public.assets set title = $2, state = $3 where asset_id = $1', [
          id,
          `edit ${this.step}.${i}`,
          this.pick(STATES),
        ]);
      }
    } else if (roll < 0.7) {
      const id = await this.anyAsset('trashed_at is null');
      if (id === null) return;
      const { rows } = await this.pool.query<{ atom_id: number }>(
        'insert into public.asset_atoms (asset_id) values ($1) returning atom_id',
        [id],
      );
      await this.pool.query('update public.assets set latest_atom_id = $2 where asset_id = $1', [id, rows[0]!.atom_id]);
    } else if (roll < 0.8) {
      const id = await this.anyAsset('trashed_at is null');
      if (id !== null) await this.pool.query('update public.assets set trashed_at = now() where asset_id = $1', [id]);
    } else if (roll < 0.88) {
      const id = await this.anyAsset('trashed_at is not null');
      if (id !== null) await this.pool.query('update public.assets set trashed_at = null where asset_id = $1', [id]);
    } else if (roll < 0.95) {
      const id = await this.anyAsset('not exists (select 1 from public.assets c where c.parent_id = assets.asset_id)');
      if (id !== null) await this.pool.query('delete from public.assets where asset_id = $1', [id]);
    } else {
      const id = await this.anyAsset();
      if (id !== null)
        await this.pool.query('insert into public.asset_keywords values ($1, $2) on conflict do nothing', [
          id,
          this.pick(KEYWORDS),
        ]);
    }
  }

  private async create(): Promise<void> {
    const client = await this.pool.connect();
    try {
      await client.query('begin');
      const supertype = this.random() < 0.2 ? 'Project' : 'Resource';
      const parent = this.random() < 0.2 ? await this.anyAsset("supertype = 'Resource'") : null;
      const { rows } = await client.query<{ asset_id: number }>(
        'insert into public.assets (supertype, parent_id, state, schema_id, type_id, domain_id, title) values ($1, $2, $3, 1, 2, 3, $4) returning asset_id',
        [supertype, parent, this.pick(STATES), `asset ${this.step}`],
      );
      const id = rows[0]!.asset_id;
      const { rows: atoms } = await client.query<{ atom_id: number }>(
        'insert into public.asset_atoms (asset_id) values ($1) returning atom_id',
        [id],
      );
      await client.query('update public.assets set latest_atom_id = $2 where asset_id = $1', [id, atoms[0]!.atom_id]);
      await client.query('insert into public.asset_keywords values ($1, $2)', [id, this.pick(KEYWORDS)]);
      await client.query('commit');
    } catch (error) {
      await client.query('rollback');
      throw error;
    } finally {
      client.release();
    }
  }
}
