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
  const listener = new Listener(options, { ...options.also, [PAYLOADS_READY_CHANNEL]: onReady }, onReady);
  listener.start();
  return listener;
}

interface Connection {
  readonly client: pg.Client;
  readonly socket: net.Socket | undefined;
}

/** listenForPayloads' connection, opened again after each failure until closed. */
class Listener implements PayloadsListener {
  private current: Connection | undefined;
  private closed = false;
  private retry: NodeJS.Timeout | undefined;
  private failures = 0;

  constructor(
    private readonly options: PayloadsListenerOptions,
    private readonly channels: Readonly<Record<string, () => void>>,
    private readonly onReady: () => void,
  ) {}

  start(): void {
    void this.connect();
  }

  private connectLater(delayMs: number): void {
    if (this.closed) return;
    clearTimeout(this.retry);
    this.retry = setTimeout(() => void this.connect(), delayMs);
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retry);
    const open = this.current;
    this.current = undefined;
    if (!open) return;
    const drop = setTimeout(() => open.socket?.destroy(), this.options.closeWaitMs ?? 2000);
    await open.client.end().catch(() => {});
    clearTimeout(drop);
  }

  private async connect(): Promise<void> {
    const { connection, dropped } = this.open();
    const { client } = connection;
    try {
      await client.connect();
      await pinSearchPath(client);
      for (const channel of Object.keys(this.channels)) await client.query(`listen ${channel}`);
    } catch (error) {
      if (this.failures === 0 && !this.closed)
        this.options.logger.debug(
          { err: describeError(error) },
          'could not listen for new payloads; polling meanwhile',
        );
      this.failures += 1;
      dropped.drop();
      return;
    }
    if (dropped.done) return;
    if (this.closed) {
      dropped.done = true;
      await client.end().catch(() => {});
      return;
    }
    this.failures = 0;
    this.current = connection;
    this.onReady();
  }

  /** A client not yet connected, whose error or end drops it and opens another after a pause. */
  private open(): { connection: Connection; dropped: { done: boolean; drop(): void } } {
    // The socket is made here, so that close can drop it through Node's own API when the server does not answer.
    let socket: net.Socket | undefined;
    const client = new pg.Client({
      connectionString: this.options.databaseUrl,
      application_name: this.options.applicationName ?? 'asset-webhooks delivery listener',
      ...KEEPALIVE,
      stream: () => (socket = new net.Socket()),
    });
    const connection: Connection = {
      client,
      get socket() {
        return socket;
      },
    };
    const dropped = {
      done: false,
      drop: (): void => {
        if (dropped.done) return;
        dropped.done = true;
        if (this.current === connection) this.current = undefined;
        void client.end().catch(() => {});
        const { retryMs = 500, maxRetryMs = 5000 } = this.options;
        this.connectLater(Math.min(retryMs * 2 ** this.failures, maxRetryMs));
      },
    };
    client.on('error', dropped.drop);
    client.on('end', dropped.drop);
    client.on('notification', (message) => {
      this.channels[message.channel]?.();
    });
    return { connection, dropped };
  }
}
