import { readdirSync, readFileSync } from 'node:fs';
import type pg from 'pg';
import { measured, type Measured } from './stats.js';

/**
 * CPU time (user + system, seconds) of a process from /proc/<pid>/stat, or
 * undefined where there is no /proc or the process is gone. Linux only: the
 * benchmark reports CPU splits only where it can read them.
 */
export function processCpuSeconds(pid: number): number | undefined {
  const stat = processStat(pid);
  return stat === undefined ? undefined : stat.ticks / CLOCK_TICKS_PER_SECOND;
}

/**
 * The fields of /proc/<pid>/stat that count here: the parent's pid, utime +
 * stime in clock ticks, and cutime + cstime, the CPU of the children it has
 * waited for (reaped).
 */
function processStat(pid: number): { parent: number; ticks: number; reapedTicks: number } | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // The command name (field 2) is in parentheses and may hold spaces: count the fields after it.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const sum = (from: number, to: number): number =>
    fields.slice(from, to).reduce((total, field) => total + Number(field), 0);
  const ticks = sum(11, 13);
  const reapedTicks = sum(13, 15);
  return Number.isFinite(ticks) && Number.isFinite(reapedTicks)
    ? { parent: Number(fields[1]), ticks, reapedTicks }
    : undefined;
}

/**
 * CPU time (seconds) a process has run, from /proc/<pid>/schedstat: the
 * scheduler's own count in nanoseconds, where /proc/<pid>/stat counts 10 ms
 * ticks, which a span of a few thousand short statements splits unevenly
 * between the processes. Undefined where the file cannot be read (no /proc, a
 * kernel without scheduler statistics, the process gone).
 */
export function processSchedSeconds(pid: number): number | undefined {
  let schedstat: string;
  try {
    schedstat = readFileSync(`/proc/${pid}/schedstat`, 'utf8');
  } catch {
    return undefined;
  }
  const nanoseconds = Number(schedstat.split(' ')[0]);
  return Number.isFinite(nanoseconds) ? nanoseconds / 1e9 : undefined;
}

/**
 * The process id of the postmaster of the server `client` is connected to,
 * where that server runs on this machine (its backend is a child of the
 * postmaster); undefined for a server elsewhere or without /proc.
 */
export async function postmasterOf(client: pg.Pool | pg.PoolClient): Promise<number | undefined> {
  const { rows } = await client.query<{ pid: number }>('select pg_backend_pid() as pid');
  const backend = rows[0]!.pid;
  // A server elsewhere (--database-url) has its own pids: one may be a local process of another program.
  if (!isPostgres(backend)) return undefined;
  const parent = processStat(backend)?.parent;
  return parent !== undefined && isPostgres(parent) ? parent : undefined;
}

function isPostgres(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').startsWith('postgres');
  } catch {
    return false;
  }
}

/**
 * CPU time of one PostgreSQL server on this machine: its postmaster and every
 * process it started (backends, WAL writer, checkpointer, autovacuum...),
 * summed: what the database server did for a measured span. Each running
 * process counts by its schedstat (nanoseconds), or by its ticks where that
 * cannot be read. A backend that exits in the span does not take its CPU with
 * it: the postmaster reaps it, and the CPU of reaped children is counted with
 * the postmaster's (without that, a connection closing mid-span made the
 * difference negative); the kernel keeps that only in ticks, so such a
 * backend's share is exact to a tick. Other servers on the machine are not
 * counted: one that stopped mid-span (another test file's embedded server)
 * took its whole CPU out of a machine-wide sum. Undefined where /proc cannot
 * tell.
 */
export function postgresCpuSeconds(postmaster: number): number | undefined {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return undefined;
  }
  let seconds = 0;
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    const stat = processStat(pid); // undefined: gone meanwhile
    if (stat?.parent === postmaster) seconds += processSchedSeconds(pid) ?? stat.ticks / CLOCK_TICKS_PER_SECOND;
  }
  // The postmaster last: a child reaped while the others were read is then
  // counted twice (a slight excess) rather than not at all.
  const own = processStat(postmaster);
  if (own === undefined) return undefined;
  const ownSeconds = processSchedSeconds(postmaster) ?? own.ticks / CLOCK_TICKS_PER_SECOND;
  return seconds + ownSeconds + own.reapedTicks / CLOCK_TICKS_PER_SECOND;
}

/** USER_HZ: 100 on every Linux architecture Node supports. */
const CLOCK_TICKS_PER_SECOND = 100;

/**
 * CPU seconds used so far by this process (`node`), the PostgreSQL server of
 * `postmaster` (`postgres`) and each of `others` (a name for a process id);
 * undefined where /proc cannot tell.
 */
function cpuNow(
  postmaster: number | undefined,
  others: Readonly<Record<string, number>>,
): Record<string, number> | undefined {
  const reading: Record<string, number> = {};
  const postgres = postmaster === undefined ? undefined : postgresCpuSeconds(postmaster);
  if (postgres === undefined) return undefined;
  reading.postgres = postgres;
  for (const [name, pid] of Object.entries(others)) {
    const seconds = processSchedSeconds(pid) ?? processCpuSeconds(pid);
    if (seconds === undefined) return undefined;
    reading[name] = seconds;
  }
  const usage = process.cpuUsage();
  reading.node = (usage.user + usage.system) / 1e6;
  return reading;
}

/** Where a span's CPU is read: the PostgreSQL server (by its postmaster, see postmasterOf) and other processes by name. */
export interface CpuParties {
  readonly postmaster: number | undefined;
  readonly others?: Readonly<Record<string, number>>;
}

/** One side's CPU per unit of work, in microseconds, by party (medians of the measured rounds). */
export type CpuSplit<Party extends string> = { readonly [P in Party]: Measured };

/**
 * The samples `withCpu` gathered for `parties`, as medians with their spread;
 * undefined when a party was never read (no /proc, a server elsewhere).
 */
export function measuredSplit<Party extends string>(
  samples: Readonly<Record<string, number[]>>,
  parties: readonly Party[],
): CpuSplit<Party> | undefined {
  if (parties.some((party) => !samples[party]?.length)) return undefined;
  return Object.fromEntries(parties.map((party) => [party, measured(samples[party]!)])) as CpuSplit<Party>;
}

/**
 * How many CPUs the parties of `split` kept busy in each measured round: the
 * round's CPU per unit times its rate (units per second, in the order of the
 * rounds, as `split` holds them). Near the machine's CPU count, a rate is
 * bound by CPU, and only less work per unit raises it; well below it, by
 * waiting, and more work in parallel may. Undefined when the rounds do not
 * pair up.
 */
export function busyCpus(split: CpuSplit<string>, rates: readonly number[]): Measured | undefined {
  const perParty = Object.values(split).map((party) => party.runs);
  if (perParty.length === 0 || perParty.some((runs) => runs.length !== rates.length)) return undefined;
  return measured(rates.map((rate, round) => (perParty.reduce((sum, runs) => sum + runs[round]!, 0) * rate) / 1e6));
}

/**
 * Runs `span` and adds the CPU it took per unit of work (a payload, an event),
 * in microseconds, to `samples`, one list per party: `node`, `postgres` and
 * each of `others`. Adds nothing where /proc cannot tell (a server on another
 * machine), or when `samples` is undefined (an unmeasured warm-up round).
 */
export async function withCpu<T>(
  samples: Record<string, number[]> | undefined,
  units: number,
  parties: CpuParties,
  span: () => Promise<T>,
): Promise<T> {
  const before = cpuNow(parties.postmaster, parties.others ?? {});
  const result = await span();
  const after = cpuNow(parties.postmaster, parties.others ?? {});
  if (samples && before && after) {
    for (const [party, seconds] of Object.entries(after))
      (samples[party] ??= []).push(((seconds - before[party]!) * 1e6) / units);
  }
  return result;
}
