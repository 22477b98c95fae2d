import type pg from 'pg';

/**
 * Derives eventIds in Node exactly as asset_webhooks.event_id_of does in SQL
 * (sql/functions/event_id_of.sql): a UUIDv7 of 48 bits of the capture time in milliseconds,
 * the version digit, 12 random bits of the installation, then the variant
 * bits over the row's seq mixed (xor) with a 62-bit key of the installation.
 *
 * The coalescer derives every id of a run, up to a million a drain. In SQL
 * the derivation (text formatting, numeric epoch arithmetic) costs database
 * CPU that the run's reads wait on; here it costs a fraction of that, in the
 * process that needs the ids anyway.
 *
 * SQL stays the reference: `load` reads the installation's key and random
 * bits back from the function itself and checks one derivation against it,
 * so the two cannot silently disagree.
 */
export class EventIds {
  private constructor(
    /** Bits 32-61 of the key. */
    private readonly keyHigh: number,
    /** Bits 0-31 of the key. */
    private readonly keyLow: number,
    /** The three hex digits after the version digit. */
    private readonly randA: string,
  ) {}

  /** The eventId of the outbox row `seq` captured at `occurredMs` (milliseconds since the epoch, floored). */
  of(seq: number, occurredMs: number): string {
    // seq < 2^53 (pg's int8 parser makes it a number, see db/connect.ts): split it into 32-bit halves.
    const high = ((((seq / 0x1_0000_0000) | 0) ^ this.keyHigh) & 0x3fff_ffff) | 0x8000_0000;
    const low = ((seq >>> 0) ^ this.keyLow) >>> 0;
    // As lpad(to_hex(ms), 12, '0') does, before 1970 too: the first 12 digits of the two's complement.
    const time =
      occurredMs >= 0
        ? occurredMs.toString(16).padStart(12, '0')
        : BigInt.asUintN(64, BigInt(occurredMs)).toString(16).slice(0, 12);
    const mixed = (high >>> 0).toString(16) + low.toString(16).padStart(8, '0');
    return `${time.slice(0, 8)}-${time.slice(8)}-7${this.randA}-${mixed.slice(0, 4)}-${mixed.slice(4)}`;
  }

  /** Reads the installation's key from asset_webhooks.event_id_of and checks one derivation against it. */
  static async load(client: pg.PoolClient | pg.Pool): Promise<EventIds> {
    const checkSeq = 0x12_3456_789a;
    const checkAt = '2025-11-24T16:00:00.123456Z';
    const {
      rows: [row],
    } = await client.query<{ probe: string; check: string }>(
      `select asset_webhooks.event_id_of(0, to_timestamp(0))::text as probe,
              asset_webhooks.event_id_of($1, $2::timestamptz)::text as check`,
      [checkSeq, checkAt],
    );
    // With seq 0 and time 0 the id is the key itself: 000000000000 7rrr kkkk-kkkkkkkkkkkk (variant bits set).
    const hex = row!.probe.replaceAll('-', '');
    const ids = new EventIds(
      Number.parseInt(hex.slice(16, 24), 16) & 0x3fff_ffff,
      Number.parseInt(hex.slice(24, 32), 16) >>> 0,
      hex.slice(13, 16),
    );
    const derived = ids.of(checkSeq, Date.parse(checkAt)); // Date.parse drops the microseconds, as event_id_of floors them
    if (derived !== row!.check) {
      throw new Error(
        `eventIds derived in Node (${derived}) differ from asset_webhooks.event_id_of (${row!.check}): ` +
          'the function was changed outside the migrations; coalescing stops rather than deliver ids that investigations cannot find',
      );
    }
    return ids;
  }
}

/**
 * Milliseconds since the epoch of a timestamp formatted by the claim
 * (`YYYY-MM-DDTHH:MI:SS.MSZ`, UTC, years 100 to 9999), without making a Date.
 */
export function millisOf(timestamp: string): number {
  return Date.UTC(
    Number(timestamp.slice(0, 4)),
    Number(timestamp.slice(5, 7)) - 1,
    Number(timestamp.slice(8, 10)),
    Number(timestamp.slice(11, 13)),
    Number(timestamp.slice(14, 16)),
    Number(timestamp.slice(17, 19)),
    Number(timestamp.slice(20, 23)),
  );
}
