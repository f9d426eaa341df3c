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
 * because whatever was notified while it was down is lost and must be caught up by a read. Channels
 * may be added and removed while it runs (`listenAlso`, `unlisten`); a reconnect listens to the current ones.
 */
export class PgListener {
  private client: pg.Client | null = null;
  private closed = false;
  private failures = 0;
  private timer: NodeJS.Timeout | null = null;
  private readonly channels: Set<string>;
  /** A connect in progress (it listens to every channel in the set, those added meanwhile included). */
  private connecting: Promise<void> | null = null;
  /** The LISTEN/UNLISTEN changes asked for, run one after another (applyChannel). */
  private channelChanges: Promise<void> = Promise.resolve();

  constructor(
    private readonly url: string,
    channels: readonly string[],
    private readonly handlers: NotificationHandlers,
  ) {
    this.channels = new Set(channels);
  }

  /** Connects and listens; resolves once listening (or once the first attempt failed: it keeps trying). */
  async start(): Promise<void> {
    await this.connect(false);
  }

  /**
   * Listens to `channel` too. Resolved once the session's LISTEN has committed: every transaction that
   * commits after that notifies this session. Also resolved (never rejected) when the session is down or
   * fails meanwhile: its reconnect listens to the channel and says `reconnected`, and until then the
   * daemon polls (runtime/cluster-changes.ts).
   */
  async listenAlso(channel: string): Promise<void> {
    this.channels.add(channel);
    await this.applyChannel(channel);
  }

  /** Stops listening to `channel` (the server no longer sends its notifications to this session). */
  async unlisten(channel: string): Promise<void> {
    this.channels.delete(channel);
    await this.applyChannel(channel);
  }

  /**
   * Sends LISTEN or UNLISTEN of `channel`, whichever the set says when it runs: after the changes asked
   * before it (one queue) and after a connect in progress (its loop listens to the set as it is then). So
   * the last of several `listenAlso`/`unlisten` calls wins, however many ticks each caller's awaits took
   * (a follower that arrives while the last one leaves). A LISTEN or UNLISTEN that fails ends the session:
   * what it listens to is unknown then. This waits for one reconnect, which listens to the set and says
   * `reconnected` (or fails, is retried, and the daemon polls meanwhile).
   */
  private applyChannel(channel: string): Promise<void> {
    const applied = this.channelChanges.then(async () => {
      await this.connecting;
      const client = this.client;
      if (!client) return; // down: its reconnect listens to the set
      try {
        await client.query(`${this.channels.has(channel) ? 'LISTEN' : 'UNLISTEN'} ${quoteIdentifier(channel)}`);
      } catch (err) {
        if (this.client !== client || this.closed) return; // lost meanwhile: its own reconnect is under way
        this.client = null;
        client.end().catch(() => {});
        this.handlers.failed(err as Error);
        await this.connect(true);
      }
    });
    this.channelChanges = applied;
    return applied;
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => {});
  }

  private connect(again: boolean): Promise<void> {
    const connecting = this.connectOnce(again).finally(() => {
      if (this.connecting === connecting) this.connecting = null;
    });
    this.connecting = connecting;
    return connecting;
  }

  /** Never rejects: a failure is reported to the handlers and retried. */
  private async connectOnce(again: boolean): Promise<void> {
    if (this.closed) return;
    let client: pg.Client | null = null;
    try {
      client = await connectPostgres(this.url);
      client.on('notification', (m) => this.handlers.notified({ channel: m.channel, payload: m.payload ?? '' }));
      client.on('error', (err) => this.lost(client!, err));
      client.on('end', () => this.lost(client!, new Error('the LISTEN session ended')));
      // The live set: a channel added while these LISTENs run is listened to too (a Set's iteration visits it).
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
