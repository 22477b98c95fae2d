import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

// Resolved from the compiled file, dist-bench/bench/src/run-process.js, to the repository's CLI.
const cli = fileURLToPath(new URL('../../../bin/asset-webhooks.js', import.meta.url));

/** The real `run` command as a child process, with its peak RSS sampled from /proc. */
export interface RunProcess {
  readonly pid: number;
  /** Peak resident set size so far, in MB (VmHWM), or NaN where /proc is missing. */
  peakRssMb(): number;
  stop(): Promise<number | null>;
}

export function startRunProcess(
  databaseUrl: string,
  configPath: string,
  concurrency = 16,
  httpPort?: number,
): RunProcess {
  const child: ChildProcess = spawn(
    process.execPath,
    [
      cli,
      'run',
      '--database-url',
      databaseUrl,
      '--config',
      configPath,
      '--concurrency',
      String(concurrency),
      ...(httpPort === undefined ? [] : ['--http-port', String(httpPort), '--http-host', '127.0.0.1']),
    ],
    {
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { ...process.env, LOG_LEVEL: 'warn' },
    },
  );
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
  });
  return {
    pid: child.pid!,
    peakRssMb() {
      try {
        const match = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'));
        return match ? Number(match[1]) / 1024 : Number.NaN;
      } catch {
        return Number.NaN;
      }
    },
    stop: () =>
      new Promise((resolve) => {
        if (child.exitCode !== null) {
          if (child.exitCode !== 0) process.stderr.write(stderr);
          return resolve(child.exitCode);
        }
        child.once('exit', (code) => {
          if (code !== 0) process.stderr.write(stderr);
          resolve(code);
        });
        child.kill('SIGTERM');
      }),
  };
}
