import net from 'node:net';
import pg from 'pg';
import type { Logger } from 'pino';
import { describeError, KEEPALIVE, pinSearchPath } from '../db/connect.js';
import { PAYLOADS_READY_CHANNEL } from '../db/payloads-ready.js';

export interface PayloadsListener {
  /** Stops listening and closes the connection (at once if the server does not answer the goodbye). */
  close(): Promise<void>;
}

export interface PayloadsListenerOptions {
  readonly databaseUrl: string;
  readonly logger: Pick<Logger, 'debug'>;
  /**
   * Other channels listened on by the same connection, each with what to call
   * at its notifications, so that the process opens no connection for them.
   */
  readonly also?: Readonly<Record<string, () => void>>;
  /** The connection's application_name (pg_stat_activity). Default 'asset-webhooks delivery listener'. */
  readonly applicationName?: string;
  /** Pause before the first reconnection; it doubles with each failure in a row. Default 500 ms. */
  readonly retryMs?: number;
  /** The longest pause between reconnections. Default 5,000 ms. */
  readonly maxRetryMs?: number;
  /** How long close waits for the server to acknowledge the goodbye before it drops the socket. Default 2,000 ms. */
  readonly closeWaitMs?: number;
}

/**
 * LISTENs on PAYLOADS_READY_CHANNEL on a connection of its own (a pg.Client,
 * never one of the pool's: a pooled connection is handed to other queries),
 * calling `onReady` for each notification. A connection that errors or ends
 * is opened again after a pause that grows with each failure in a row; the
 * caller's own poll covers the gap, and `onReady` is called once each time a
 * connection starts listening, because payloads committed while none
 * listened raised no notification anyone heard.
 */
export function listenForPayloads(options: PayloadsListenerOptions, onReady: () => void): PayloadsListener {
  const channels: Record<string, () => void> = { ...options.also, [PAYLOADS_READY_CHANNEL]: onReady };
  const retryMs = options.retryMs ?? 500;
  const maxRetryMs = options.maxRetryMs ?? 5000;
  let current: { client: pg.Client; socket: net.Socket | undefined } | undefined;
  let closed = false;
  let retry: NodeJS.Timeout | undefined;
  let failures = 0;

  const reconnect = (): void => {
    if (closed) return;
    clearTimeout(retry);
    retry = setTimeout(() => void connect(), Math.min(retryMs * 2 ** failures, maxRetryMs));
  };

  const connect = async (): Promise<void> => {
    // The socket is made here, so that close can drop it through Node's own API when the server does not answer.
    let socket: net.Socket | undefined;
    const client = new pg.Client({
      connectionString: options.databaseUrl,
      application_name: options.applicationName ?? 'asset-webhooks delivery listener',
      ...KEEPALIVE,
      stream: () => (socket = new net.Socket()),
    });
    const connection = {
      client,
      get socket() {
        return socket;
      },
    };
    let dropped = false;
    const drop = (): void => {
      if (dropped) return;
      dropped = true;
      if (current === connection) current = undefined;
      void client.end().catch(() => {});
      reconnect();
    };
    client.on('error', drop);
    client.on('end', drop);
    client.on('notification', (message) => {
      channels[message.channel]?.();
    });
    try {
      await client.connect();
      await pinSearchPath(client);
      for (const channel of Object.keys(channels)) await client.query(`listen ${channel}`);
    } catch (error) {
      if (failures === 0 && !closed)
        options.logger.debug({ err: describeError(error) }, 'could not listen for new payloads; polling meanwhile');
      failures += 1;
      drop();
      return;
    }
    if (dropped) return;
    if (closed) {
      dropped = true;
      await client.end().catch(() => {});
      return;
    }
    failures = 0;
    current = connection;
    onReady();
  };

  void connect();
  return {
    async close() {
      closed = true;
      clearTimeout(retry);
      const open = current;
      current = undefined;
      if (!open) return;
      const drop = setTimeout(() => open.socket?.destroy(), options.closeWaitMs ?? 2000);
      await open.client.end().catch(() => {});
      clearTimeout(drop);
    },
  };
}
