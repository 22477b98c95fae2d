import { connect, createServer, type Server, type Socket } from 'node:net';
import { freePort } from '../../src/embedded/embedded-postgres.js';

export interface DatabaseProxy {
  /** The database URL through the proxy. */
  readonly url: string;
  /** Drops every connection and refuses new ones: the database "stops". */
  down(): void;
  /** New connections are accepted and wait, unanswered, until up(): the database "hangs". */
  hold(): void;
  up(): void;
  /**
   * Drops the database side of every open connection and leaves the client
   * side open and silent, as a NAT or load balancer that forgot them: the
   * server ends those sessions, the clients hear nothing. New connections work.
   */
  silence(): void;
  /** Connections accepted so far (held ones included). */
  readonly accepted: number;
  close(): Promise<void>;
}

/** A TCP proxy to the database of `target` that a test can take down and bring back. */
export async function databaseProxy(target: URL): Promise<DatabaseProxy> {
  let available = true;
  let holding = false;
  let accepted = 0;
  const held: Socket[] = [];
  const sockets = new Set<Socket>();
  const pairs = new Set<[Socket, Socket]>();
  const pipe = (client: Socket): void => {
    const upstream = connect(Number(target.port || 5432), target.hostname);
    const pair: [Socket, Socket] = [client, upstream];
    pairs.add(pair);
    upstream.on('close', () => pairs.delete(pair));
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => {});
    }
    client.pipe(upstream).pipe(client);
  };
  const server: Server = createServer((client) => {
    accepted += 1;
    if (holding) {
      client.on('error', () => {});
      held.push(client);
      return;
    }
    if (!available) return void client.destroy();
    pipe(client);
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
    hold() {
      holding = true;
    },
    up() {
      available = true;
      holding = false;
      for (const client of held.splice(0)) if (!client.destroyed) pipe(client);
    },
    silence() {
      for (const [client, upstream] of pairs) {
        client.unpipe(upstream);
        upstream.unpipe(client);
        upstream.destroy();
      }
    },
    get accepted() {
      return accepted;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of [...sockets, ...held.splice(0)]) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
