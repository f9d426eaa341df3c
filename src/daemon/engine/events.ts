/**
 * Engine events: published after the commit that made them true (see db/writer.ts). They drive
 * `--follow` streams, engine log lines and metrics; nothing reads them for correctness.
 */
import { EventEmitter } from 'node:events';
import type { TargetRef } from '../../domain/operations.js';

interface EventBase {
  thread_id: string;
  parent_thread_id: string | null;
  /** The W3C trace id of the command that created the thread: every log line of its work carries it. */
  trace_id: string | null;
}

export type EngineEvent =
  | (EventBase & { type: 'thread'; status: string; kind: string; target_ref: TargetRef })
  | (EventBase & {
      type: 'work_item';
      work_item_id: string;
      status: string;
      attempt: number;
      error_code: string | null;
      not_before: number | null;
    })
  | (EventBase & {
      type: 'ledger';
      work_item_id: string | null;
      seq: number;
      entry_type: string;
      attempt: number | null;
      /** For `error` entries: the error code. */
      code: string | null;
      /** For `error` entries: what happens next (retry, repair, dead_letter, canceled). */
      next: string | null;
      summary: string;
    });

export class EventBus {
  private readonly emitter = new EventEmitter();

  /** `afterBatch` runs once each committed batch's events have been delivered (the event log flushes then). */
  constructor(private readonly afterBatch: () => void = () => {}) {
    // One listener per `--follow` client, plus the logger and metrics.
    this.emitter.setMaxListeners(0);
  }

  publish(events: EngineEvent[]): void {
    for (const e of events) this.emitter.emit('event', e);
    this.afterBatch();
  }

  subscribe(listener: (e: EngineEvent) => void): () => void {
    this.emitter.on('event', listener);
    return () => this.emitter.off('event', listener);
  }
}
