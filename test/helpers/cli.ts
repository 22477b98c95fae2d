import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const cliPath = fileURLToPath(new URL('../../bin/asset-webhooks.js', import.meta.url));

export interface CliResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

export interface RunCliOptions {
  /** Added to this process's environment. */
  readonly env?: NodeJS.ProcessEnv;
  /** The command is killed, and the promise rejected, after this long; default 60 000. */
  readonly timeoutMs?: number;
  /** The CLI to run: another package's bin/asset-webhooks.js (a release's); default this checkout's. */
  readonly cli?: string;
}

/** Runs the real CLI as a child process to completion. */
export function runCli(
  args: readonly string[],
  { env = {}, timeoutMs = 60_000, cli = cliPath }: RunCliOptions = {},
): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [cli, ...args], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`asset-webhooks ${args.join(' ')} did not finish within ${timeoutMs}ms\n${stderr}`));
    }, timeoutMs);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

export interface CliProcess {
  readonly child: ChildProcess;
  readonly output: { stdout: string; stderr: string };
  /** Resolves with the exit code (or the signal name). */
  readonly exited: Promise<number | string>;
}

export interface StartCliOptions {
  /** Added to this process's environment. */
  readonly env?: NodeJS.ProcessEnv;
  /** Arguments for Node itself, before the CLI's path. */
  readonly nodeArgs?: readonly string[];
}

/** Starts the real CLI as a long-running child process (e.g. `run`). */
export function startCli(args: readonly string[], { env = {}, nodeArgs = [] }: StartCliOptions = {}): CliProcess {
  return watchCli(
    spawn(process.execPath, [...nodeArgs, cliPath, ...args], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  );
}

/** Collects the output and the exit of a child process started with piped stdout and stderr. */
export function watchCli(child: ChildProcess): CliProcess {
  const output = { stdout: '', stderr: '' };
  child.stdout!.on('data', (chunk: Buffer) => (output.stdout += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output.stderr += chunk.toString()));
  const exited = new Promise<number | string>((resolve) =>
    child.on('exit', (code, signal) => resolve(code ?? signal ?? 'unknown')),
  );
  return { child, output, exited };
}

/** The lines of a `run` process's log stream that are not JSON objects (operators' log pipelines expect none). */
export function nonJsonLines(log: string): string[] {
  return log.split('\n').filter((line) => {
    if (line.trim() === '') return false;
    try {
      const parsed: unknown = JSON.parse(line);
      return typeof parsed !== 'object' || parsed === null;
    } catch {
      return true;
    }
  });
}
