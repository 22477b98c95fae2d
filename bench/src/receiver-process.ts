import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';

/**
 * A receiver in its own process, so it does not share the event loop of what
 * is measured. It answers 200 at once; with `report` it prints one line per
 * request: the receipt time and the events' asset ids and event ids.
 */
export interface ReceiverProcess {
  readonly url: string;
  /** The receiver's process id, for its CPU time. */
  readonly pid: number;
  readonly received: Array<{ at: number; path: string; assetIds: number[]; eventIds: string[] }>;
  /** The URL that answers how many POSTs the receiver has had (a GET, not counted). */
  readonly countUrl: string;
  stop(): Promise<void>;
}

const SCRIPT = `
const http = require('node:http');
const report = process.argv[1] === 'report';
let posts = 0;
const server = http.createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/count') {
    res.writeHead(200, { 'content-type': 'text/plain' }).end(String(posts));
    return;
  }
  posts += 1;
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
    if (report) {
      const at = Date.now();
      const events = JSON.parse(Buffer.concat(chunks).toString()).events;
      process.stdout.write(JSON.stringify({ at, path: req.url, assetIds: events.map((e) => e.assetId), eventIds: events.map((e) => e.eventId) }) + '\\n');
    }
  });
});
server.keepAliveTimeout = 60000;
server.listen(0, '127.0.0.1', () => process.stdout.write('PORT ' + server.address().port + '\\n'));
`;

export async function startReceiverProcess(report: boolean): Promise<ReceiverProcess> {
  const child: ChildProcess = spawn(process.execPath, ['-e', SCRIPT, report ? 'report' : 'quiet'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const received: ReceiverProcess['received'] = [];
  const lines = createInterface({ input: child.stdout! });
  const port = await new Promise<number>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`receiver exited with ${code}`)));
    lines.on('line', (line) => {
      if (line.startsWith('PORT ')) resolve(Number(line.slice(5)));
      else received.push(JSON.parse(line) as ReceiverProcess['received'][number]);
    });
  });
  return {
    url: `http://127.0.0.1:${port}/bench`,
    countUrl: `http://127.0.0.1:${port}/count`,
    pid: child.pid!,
    received,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}
