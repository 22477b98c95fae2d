import { readdirSync, readFileSync } from 'node:fs';

/**
 * CPU time (user + system, seconds) of a process from /proc/<pid>/stat, or
 * undefined where there is no /proc or the process is gone. Linux only: the
 * benchmark reports CPU splits only where it can read them.
 */
export function processCpuSeconds(pid: number): number | undefined {
  const ticks = processTicks(pid, false);
  return ticks === undefined ? undefined : ticks / CLOCK_TICKS_PER_SECOND;
}

/** utime + stime of a process in clock ticks; with cutime + cstime, the CPU of the children it has waited for. */
function processTicks(pid: number, withReapedChildren: boolean): number | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // The command name (field 2) is in parentheses and may hold spaces: count the fields after it.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = (withReapedChildren ? fields.slice(11, 15) : fields.slice(11, 13)).reduce((sum, field) => sum + Number(field), 0);
  return Number.isFinite(ticks) ? ticks : undefined;
}

/**
 * CPU time of every PostgreSQL process on the machine (postmaster, backends,
 * WAL writer, checkpointer...), summed: what the database server did for a
 * measured span, provided nothing else uses a PostgreSQL on the machine meanwhile.
 * A backend that exits in the span does not take its CPU with it: the
 * postmaster reaps it, and the CPU of reaped children is counted with the
 * postmaster's (without that, a long-lived connection closing mid-span made
 * the difference negative). Undefined without /proc.
 */
export function postgresCpuSeconds(): number | undefined {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return undefined;
  }
  let ticks = 0;
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    let command: string;
    try {
      command = readFileSync(`/proc/${entry}/comm`, 'utf8');
    } catch {
      continue; // gone meanwhile
    }
    if (command.startsWith('postgres')) ticks += processTicks(Number(entry), true) ?? 0;
  }
  return ticks / CLOCK_TICKS_PER_SECOND;
}

/** USER_HZ: 100 on every Linux architecture Node supports. */
const CLOCK_TICKS_PER_SECOND = 100;

/**
 * CPU seconds used so far by this process (`node`), every PostgreSQL process
 * (`postgres`) and each of `others` (a name for a process id); undefined where
 * /proc cannot tell.
 */
function cpuNow(others: Readonly<Record<string, number>>): Record<string, number> | undefined {
  const reading: Record<string, number> = {};
  const postgres = postgresCpuSeconds();
  if (postgres === undefined) return undefined;
  reading.postgres = postgres;
  for (const [name, pid] of Object.entries(others)) {
    const seconds = processCpuSeconds(pid);
    if (seconds === undefined) return undefined;
    reading[name] = seconds;
  }
  const usage = process.cpuUsage();
  reading.node = (usage.user + usage.system) / 1e6;
  return reading;
}

/**
 * Runs `span` and adds the CPU it took per unit of work (a payload, an event),
 * in microseconds, to `samples`, one list per party: `node`, `postgres` and
 * each of `others`. Adds nothing where /proc cannot tell, or when `samples` is
 * undefined (an unmeasured warm-up round).
 */
export async function withCpu<T>(
  samples: Record<string, number[]> | undefined,
  units: number,
  others: Readonly<Record<string, number>>,
  span: () => Promise<T>,
): Promise<T> {
  const before = cpuNow(others);
  const result = await span();
  const after = cpuNow(others);
  if (samples && before && after) {
    for (const [party, seconds] of Object.entries(after)) (samples[party] ??= []).push(((seconds - before[party]!) * 1e6) / units);
  }
  return result;
}
