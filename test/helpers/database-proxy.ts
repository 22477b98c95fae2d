import { connect, createServer, type Server, type Socket } from 'node:net';
import { freePort } from '../../src/embedded/embedded-postgres.js';

export interface DatabaseProxy {
  /** The database URL through the proxy. */
  readonly url: string;
  /** Drops every connection and refuses new ones: the database "stops". */
  down(): void;
  up(): void;
  close(): Promise<void>;
}

/** A TCP proxy to the database of `target` that a test can take down and bring back. */
export async function databaseProxy(target: URL): Promise<DatabaseProxy> {
  let available = true;
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    if (!available) return void client.destroy();
    const upstream = connect(Number(target.port || 5432), target.hostname);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => {});
    }
    client.pipe(upstream).pipe(client);
  });
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  const url = new URL(target.toString());
  url.hostname = '127.0.0.1';
  url.port = String(port);
  return {
    url: url.toString(),
    down() {
      available = false;
      for (const socket of sockets) socket.destroy();
    },
    up() {
      available = true;
    },
    close: () => new Promise<void>((resolve) => {
      for (const socket of sockets) socket.destroy();
      server.close(() => resolve());
    }),
  };
}
