import { spawn } from 'node:child_process';
import { cliPath, startCli, watchCli, type CliProcess } from './cli.js';
import { eventually } from './receiver.js';

/** How a `run` process of the real CLI is started. */
export interface RunOptions {
  /** Given as --database-url. */
  readonly databaseUrl: string;
  /** The configuration file, given as --config. */
  readonly configFile: string;
  /** Given as --http-port; no probe port unless given. */
  readonly httpPort?: number;
  /** Given as --http-host (which needs httpPort); every interface unless given. */
  readonly httpHost?: string;
  /** More options of `run`, after the others (e.g. --database-pool-size). */
  readonly args?: readonly string[];
  /** The process's limit of open file descriptors (`ulimit -n`, set by sh before it execs Node); the inherited one unless given. */
  readonly fileLimit?: number;
  /** Added to this process's environment (e.g. the OTEL_ variables). */
  readonly env?: NodeJS.ProcessEnv;
}

/** Starts `asset-webhooks run` as a child process; wait for it with untilRunning, end it with stopRun. */
export function startRun({
  databaseUrl,
  configFile,
  httpPort,
  httpHost,
  args: more = [],
  fileLimit,
  env = {},
}: RunOptions): CliProcess {
  const args = [
    'run',
    '--database-url',
    databaseUrl,
    '--config',
    configFile,
    ...(httpPort === undefined ? [] : ['--http-port', String(httpPort)]),
    ...(httpHost === undefined ? [] : ['--http-host', httpHost]),
    ...more,
  ];
  if (fileLimit === undefined) return startCli(args, { env });
  return watchCli(
    spawn('sh', ['-c', `ulimit -n ${fileLimit} && exec "$0" "$@"`, process.execPath, cliPath, ...args], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  );
}

/** Resolves once the run process logs that it is running; rejects, with its stderr, if it exits first. */
export async function untilRunning(run: CliProcess): Promise<void> {
  await eventually(
    async () => {
      if (run.child.exitCode !== null) throw new Error(`run exited early:\n${run.output.stderr}`);
      return run.output.stderr.includes('asset-webhooks running') ? true : undefined;
    },
    { timeoutMs: 30_000, what: 'the run process to start' },
  );
}

/** Sends SIGTERM unless the process has ended already; resolves with its exit code (or signal name). */
export async function stopRun(run: CliProcess): Promise<number | string> {
  if (run.child.exitCode === null && run.child.signalCode === null) run.child.kill('SIGTERM');
  return run.exited;
}
