/**
 * Postgres LISTEN/NOTIFY between daemons on one database (issue 18). A write that changes what other
 * daemons should know — work became due, a thread moved on — sends `pg_notify` in its own transaction,
 * so the notification is delivered at COMMIT and never for a rollback. Each daemon listens on one
 * dedicated session (a pooled connection would lose its LISTEN when returned). Notifications carry ids
 * only; listeners re-read the committed rows.
 */
import type pg from 'pg';
import { connectPostgres } from './connection.js';

export interface Notification {
  channel: string;
  payload: string;
}

/** What a listener is told: a notification, or that it reconnected (notifications may have been missed meanwhile). */
export interface NotificationHandlers {
  notified(n: Notification): void;
  reconnected(): void;
  /** The session failed; the listener reconnects on its own. */
  failed(err: Error): void;
}

/** The command tag of the last statement of a (possibly multi-statement) query's results. */
export function lastCommand(result: pg.QueryResult | pg.QueryResult[]): string {
  return (Array.isArray(result) ? result.at(-1)! : result).command;
}

/** The delays before reconnecting a lost LISTEN session: quick first, then at most every 5 s. */
const RECONNECT_DELAYS_MS = [100, 500, 1000, 2000, 5000];

/**
 * One LISTEN session on `channels`, kept open: when it fails it reconnects (backing off) and says so,
 * because whatever was notified while it was down is lost and must be caught up by a read.
 */
export class PgListener {
  private client: pg.Client | null = null;
  private closed = false;
  private failures = 0;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly url: string,
    private readonly channels: readonly string[],
    private readonly handlers: NotificationHandlers,
  ) {}

  /** Connects and listens; resolves once listening (or once the first attempt failed: it keeps trying). */
  async start(): Promise<void> {
    await this.connect(false);
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => {});
  }

  private async connect(again: boolean): Promise<void> {
    if (this.closed) return;
    let client: pg.Client | null = null;
    try {
      client = await connectPostgres(this.url);
      client.on('notification', (m) => this.handlers.notified({ channel: m.channel, payload: m.payload ?? '' }));
      client.on('error', (err) => this.lost(client!, err));
      client.on('end', () => this.lost(client!, new Error('the LISTEN session ended')));
      for (const channel of this.channels) await client.query(`LISTEN ${quoteIdentifier(channel)}`);
      if (this.closed) {
        await client.end().catch(() => {});
        return;
      }
      this.client = client;
      this.failures = 0;
      if (again) this.handlers.reconnected();
    } catch (err) {
      await client?.end().catch(() => {});
      this.handlers.failed(err as Error);
      this.retry();
    }
  }

  private lost(client: pg.Client, err: Error): void {
    if (this.client !== client) return; // an old session's late event
    this.client = null;
    client.end().catch(() => {});
    if (this.closed) return;
    this.handlers.failed(err);
    this.retry();
  }

  private retry(): void {
    if (this.closed) return;
    const delay = RECONNECT_DELAYS_MS[Math.min(this.failures++, RECONNECT_DELAYS_MS.length - 1)]!;
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.connect(true);
    }, delay);
    this.timer.unref();
  }
}

function quoteIdentifier(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}
