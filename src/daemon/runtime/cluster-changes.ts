/**
 * Several daemons on one database (issue 18): what a write tells the others, and what a daemon does
 * when told. Three channels, ids only (a payload stays under Postgres's 8000 bytes):
 *   - `combine_work`: work may be claimable now. Payload `queued`: an item was queued (submit, retry,
 *     requeue, a rescued lease, a held item made due); every daemon wakes its producer. Payload `freed`:
 *     items only left the running states (their locks, budget reservations and slots are free again,
 *     parked items may have been unparked): that can make claimable only work already queued, so a
 *     daemon whose last look found no queued item at all does not wake (`wakeIfWorkQueued`): once the
 *     queue is drained, each item another daemon finishes no longer costs every daemon an empty round.
 *   - `combine_events`: `thread_id:0:parent_thread_id` per thread whose ledger or status the write
 *     changed (`*` when one write touched many threads). A `--follow` stream on another daemon re-reads
 *     what it has not seen yet (follow-stream.ts). The middle field once carried the write's newest
 *     ledger seq; on Postgres the seqs are linked in the COMMIT's own query, after the notifications are
 *     written, and no listener ever read it, so it is 0 (kept so the payload's shape does not change).
 *     A daemon listens to it only while it has a follower (RemoteChanges): others' notifications on it
 *     are then not delivered to it at all.
 *   - `combine_cancel`: the ids of threads the write canceled, comma-separated (as many notifications
 *     as their length needs). A cancel sent to one daemon ends the thread in the database; the daemon
 *     that holds its item's lease aborts the call in flight when told, as it would for a cancel sent to
 *     it, instead of paying for an answer nobody will apply.
 * On a lost LISTEN session the daemon polls every second (the producer looks again, every follower
 * re-reads) until it has reconnected, and once more then: nothing notified meanwhile is waited for forever.
 */
import { EventEmitter } from 'node:events';
import type { Logger } from '../../core/logger.js';
import type { Notification } from '../../db/pg/notifications.js';
import type { EngineEvent } from '../engine/events.js';
import type { DaemonStorage, Listening } from '../storage.js';

export const WORK_CHANNEL = 'combine_work';
export const EVENTS_CHANNEL = 'combine_events';
export const CANCEL_CHANNEL = 'combine_cancel';
/** A `combine_cancel` payload's length stays under this (Postgres refuses payloads of 8000 bytes or more). */
const MAX_CANCEL_PAYLOAD = 7_000;
/** Past this many threads in one write, one `*` notification instead of one per thread. */
const MAX_THREAD_NOTIFICATIONS = 64;

/** A thread another daemon changed (or `*`: any thread may have changed). */
export interface RemoteChange {
  threadId: string | '*';
  parentThreadId: string | null;
}

/** The notifications a committed write's events call for. */
export function notificationsOf(events: EngineEvent[]): Notification[] {
  const notes: Notification[] = [];
  if (events.some(queuesWork)) notes.push({ channel: WORK_CHANNEL, payload: QUEUED });
  else if (events.some(freesWork)) notes.push({ channel: WORK_CHANNEL, payload: FREED });
  const threads = new Map<string, string | null>();
  // What a follower re-reads: ledger entries and thread statuses (a claim's work item event alone is
  // not worth a notification: NOTIFY serializes the commits that send one).
  for (const e of events) {
    if (e.type === 'work_item') continue;
    threads.set(e.thread_id, threads.get(e.thread_id) ?? e.parent_thread_id);
  }
  if (threads.size > MAX_THREAD_NOTIFICATIONS) notes.push({ channel: EVENTS_CHANNEL, payload: '*' });
  else for (const [id, parent] of threads) notes.push({ channel: EVENTS_CHANNEL, payload: `${id}:0:${parent ?? ''}` });
  let canceled = '';
  for (const e of events) {
    if (e.type !== 'thread' || e.status !== 'canceled') continue;
    if (canceled.length + e.thread_id.length >= MAX_CANCEL_PAYLOAD) {
      notes.push({ channel: CANCEL_CHANNEL, payload: canceled });
      canceled = '';
    }
    canceled += canceled === '' ? e.thread_id : `,${e.thread_id}`;
  }
  if (canceled !== '') notes.push({ channel: CANCEL_CHANNEL, payload: canceled });
  return notes;
}

/** `combine_work` payloads: what a write did to the queue. */
const QUEUED = 'queued';
const FREED = 'freed';

/** An item queued: another daemon may claim it now. */
function queuesWork(e: EngineEvent): boolean {
  return e.type === 'work_item' && e.status === 'queued';
}

/** No longer holding a slot, a lock or a reservation: queued work may be claimable now. */
function freesWork(e: EngineEvent): boolean {
  return e.type === 'work_item' && e.status !== 'claimed' && e.status !== 'running';
}

function parseChange(payload: string): RemoteChange | null {
  if (payload === '*') return { threadId: '*', parentThreadId: null };
  const [threadId, , parent] = payload.split(':');
  return threadId ? { threadId, parentThreadId: parent || null } : null;
}

/** How the daemon's LISTEN session follows `combine_events` (listenToOtherDaemons). */
interface EventsChannel {
  listen(): Promise<void>;
  unlisten(): Promise<void>;
}

/**
 * Where follow streams learn that another daemon changed a thread. The daemon listens to `combine_events`
 * only while it has a follower: Postgres delivers every notification to every session listening to its
 * channel, and most of the time nobody on this daemon follows anything.
 */
export class RemoteChanges {
  private readonly emitter = new EventEmitter();
  private followers = 0;
  private channel: EventsChannel | null = null;
  /** The latest LISTEN of `combine_events` (resolved when not listening, or when the daemon has no session yet). */
  private listening: Promise<void> = Promise.resolve();

  constructor() {
    // One listener per `--follow` client.
    this.emitter.setMaxListeners(0);
  }

  publish(change: RemoteChange): void {
    this.emitter.emit('change', change);
  }

  /**
   * Resolved once the daemon listens to `combine_events`: every change another daemon commits from then on
   * reaches `listener` (or a poll's `*` while the session is down). A follower reads its snapshot after this.
   */
  async subscribe(listener: (c: RemoteChange) => void): Promise<() => void> {
    this.emitter.on('change', listener);
    if (this.followers++ === 0 && this.channel) this.listening = this.channel.listen();
    await this.listening;
    return () => {
      this.emitter.off('change', listener);
      if (--this.followers === 0) void this.channel?.unlisten();
    };
  }

  /**
   * The daemon's LISTEN session is up: it follows `combine_events` now if someone already follows (and
   * they re-read: what another daemon changed before this LISTEN notified nobody here).
   */
  attach(channel: EventsChannel): void {
    this.channel = channel;
    if (this.followers === 0) return;
    this.listening = channel.listen();
    void this.listening.then(() => this.publish({ threadId: '*', parentThreadId: null }));
  }
}

/** While the LISTEN session is down, the producer and the followers look again this often. */
const POLL_WHILE_DEAF_MS = 1000;

/**
 * Starts listening to the other daemons (Postgres); null on SQLite. While the session is down (until
 * it reconnects) the daemon polls instead: nothing another daemon does waits on a lost notification.
 */
export function listenToOtherDaemons(
  storage: Pick<DaemonStorage<EngineEvent>, 'listen'>,
  d: {
    wake: () => void;
    /** `wake`, unless the producer's last look found no queued item (engine.ts `wakeIfWorkQueued`). */
    wakeIfWorkQueued: () => void;
    abortThreads: (threadIds: ReadonlySet<string>) => void;
    remote: RemoteChanges;
    logger: Logger;
  },
): Promise<Pick<Listening, 'close'>> | null {
  const log = d.logger.child({ component: 'cluster' });
  const lookAgain = () => {
    d.wake();
    d.remote.publish({ threadId: '*', parentThreadId: null });
  };
  let poll: NodeJS.Timeout | null = null;
  const stopPolling = () => {
    if (poll) clearInterval(poll);
    poll = null;
  };
  // `combine_events` only while a follower needs it (RemoteChanges.attach).
  const listening = storage.listen([WORK_CHANNEL, CANCEL_CHANNEL], {
    notified: (n) => {
      // Any other payload (a daemon of an earlier version sends '') wakes: it may have queued work.
      if (n.channel === WORK_CHANNEL) return n.payload === FREED ? d.wakeIfWorkQueued() : d.wake();
      if (n.channel === CANCEL_CHANNEL) return d.abortThreads(new Set(n.payload.split(',')));
      const change = parseChange(n.payload);
      if (change) d.remote.publish(change);
    },
    reconnected: () => {
      stopPolling();
      log.info('listening to the other daemons again; looking for work and changes missed meanwhile');
      lookAgain();
    },
    failed: (err) => {
      log.warn({ err: { message: err.message } }, 'the session listening to the other daemons failed; polling every second until it reconnects');
      if (poll) return;
      poll = setInterval(lookAgain, POLL_WHILE_DEAF_MS);
      poll.unref();
    },
  });
  return (
    listening?.then((l) => {
      // Work another daemon queued between the engine's first round and this LISTEN sent its notification
      // to nobody: one more round finds it.
      d.wake();
      d.remote.attach({ listen: () => l.listenAlso(EVENTS_CHANNEL), unlisten: () => l.unlisten(EVENTS_CHANNEL) });
      return {
        close: async () => {
          stopPolling();
          await l.close();
        },
      };
    }) ?? null
  );
}
