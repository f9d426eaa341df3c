/**
 * `--follow`: a thread's events (and its children's) as they happen, until the thread ends. The
 * subscription starts before the snapshot is read, so no event between the two is lost; the last
 * message carries the final thread.
 */
import type { Db } from '../../db/connection.js';
import { getThread } from '../../db/threads.js';
import { isTerminalThread } from '../../domain/states.js';
import type { EngineEvent, EventBus } from '../engine/events.js';
import { threadView, type ThreadView } from '../views.js';
import { CommandError } from '../../core/errors.js';

/** An engine event as streamed to a follower: its `type` renamed to `event`. */
type EventMessage = EngineEvent extends infer E ? (E extends { type: infer T } ? Omit<E, 'type'> & { event: T } : never) : never;

export type FollowMessage =
  | EventMessage
  | { event: 'snapshot'; thread: ThreadView }
  | { event: 'end'; thread: ThreadView };

export async function* followThread(db: Db, bus: EventBus, threadId: string, signal: AbortSignal | undefined): AsyncGenerator<FollowMessage> {
  const queue: EngineEvent[] = [];
  let wakeUp: (() => void) | null = null;
  const unsubscribe = bus.subscribe((e) => {
    if (e.thread_id !== threadId && e.parent_thread_id !== threadId) return;
    queue.push(e);
    wakeUp?.();
  });
  const onAbort = () => wakeUp?.();
  signal?.addEventListener('abort', onAbort);
  try {
    const initial = getThread(db, threadId);
    if (!initial) throw new CommandError('NOT_FOUND', `no thread "${threadId}"`);
    yield { event: 'snapshot', thread: threadView(db, initial) };
    if (isTerminalThread(initial.status)) {
      yield { event: 'end', thread: threadView(db, initial) };
      return;
    }
    while (!signal?.aborted) {
      if (queue.length === 0) await new Promise<void>((r) => (wakeUp = r));
      wakeUp = null;
      for (const e of queue.splice(0)) {
        const { type, ...rest } = e;
        yield { event: type, ...rest } as FollowMessage;
        if (e.type === 'thread' && e.thread_id === threadId && isTerminalThread(e.status)) {
          yield { event: 'end', thread: threadView(db, getThread(db, threadId)!) };
          return;
        }
      }
    }
  } finally {
    signal?.removeEventListener('abort', onAbort);
    unsubscribe();
  }
}
