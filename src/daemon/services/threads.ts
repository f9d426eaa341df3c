/**
 * The thread service: requests of work (`combine run` and its shorthands), what may be done to a
 * thread afterwards (retry, replay, cancel) and what can be read about threads. Each command is one
 * writer transaction — an acknowledged command is on disk, a refused one stored nothing — after which
 * the engine is told (woken, or asked to abort calls in flight).
 */
import type { Clock } from '../../core/clock.js';
import { CommandError } from '../../core/errors.js';
import type { Db } from '../../db/connection.js';
import { getThread, listThreads, type ThreadListFilter } from '../../db/threads.js';
import { applyReplay, planReplay, type ReplayReport } from '../../ledger/replay.js';
import { SHORTHANDS } from '../../operations/builtin/index.js';
import type { OperationRegistry } from '../../operations/registry.js';
import type { EngineContext } from '../engine/completer.js';
import type { Engine } from '../engine/engine.js';
import type { EventBus } from '../engine/events.js';
import type { Write } from '../engine/tx.js';
import { followThread, type FollowMessage } from './follow-stream.js';
import { cancelThread, retryThread } from './commands.js';
import { holdOf, inDoubtOf } from './holds.js';
import { operationDetailView, operationSummaryView } from './operation-views.js';
import { requireOperation, submitOperation } from './submit.js';
import { dryRun } from './usage-views.js';
import type { DaemonConfig } from '../config/config.js';
import { threadDetailView, threadView, type CommandView, type ThreadView } from '../views.js';

/** What a user's request says besides what it asks for; the daemon adds its own limits (max_queued). */
export interface RequestOptions {
  force: boolean;
  /** Unstarted work fails with SKIPPED_DEADLINE this many milliseconds after the request (null: never). */
  deadlineMs: number | null;
  createdBy: string | null;
}

export interface ThreadServiceDeps {
  db: Db;
  write: Write;
  clock: Clock;
  ctx: EngineContext;
  engine: Pick<Engine, 'wake' | 'abort' | 'releaseRateLimitHold' | 'rateLimitHeldUntil'>;
  bus: EventBus;
  config: DaemonConfig;
}

export class ThreadService {
  private readonly ops: OperationRegistry;

  constructor(private readonly d: ThreadServiceDeps) {
    this.ops = d.ctx.operations;
  }

  /**
   * Requests one run of `operation` with `input` (`combine run`, HTTP `POST /commands/…`). Refuses an
   * unknown operation or invalid input (nothing stored); answers `deduplicated: true` with the thread
   * already doing (or, unless `force`, done with) it.
   */
  async run(operation: string, input: unknown, o: RequestOptions): Promise<CommandView> {
    const deadlineAt = o.deadlineMs === null ? null : this.d.clock.now() + o.deadlineMs;
    const opts = { force: o.force, deadlineAt, createdBy: o.createdBy, maxQueued: this.d.config.flow.maxQueued };
    const r = await this.d.write((tx) => submitOperation(tx, this.ops, operation, input, opts));
    if (!r.deduplicated) this.d.engine.wake();
    return { thread_id: r.thread.id, status: r.thread.status, deduplicated: r.deduplicated };
  }

  generateEpic(projectId: string, epicId: string, o: RequestOptions): Promise<CommandView> {
    const { operation, input } = SHORTHANDS.generateEpic(projectId, epicId);
    return this.run(operation, input, o);
  }

  generateAll(projectId: string, o: RequestOptions): Promise<CommandView> {
    const { operation, input } = SHORTHANDS.generateAll(projectId);
    return this.run(operation, input, o);
  }

  async retry(threadId: string): Promise<ThreadView> {
    const t = await this.d.write((tx) => retryThread(tx, this.ops, threadId, this.d.config.flow.maxQueued));
    // "Retry" means now: a 429 hold of the model (up to retry.max_provider_wait) is lifted too.
    this.d.engine.releaseRateLimitHold();
    return threadView(this.d.db, t);
  }

  /** `combine replay`: a report (read-only), or with `apply` the recorded answer queued for application. */
  async replay(threadId: string, o: { apply: boolean; responseSeq: number | null }): Promise<ReplayReport> {
    if (!o.apply) return planReplay(this.d.db, this.ops, threadId, o.responseSeq);
    const r = await this.d.write((tx) => applyReplay(tx, this.ops, threadId, o.responseSeq));
    this.d.engine.wake();
    return r;
  }

  async cancel(threadId: string): Promise<ThreadView> {
    const r = await this.d.write((tx) => cancelThread(tx, this.d.ctx, threadId));
    this.d.engine.abort(r.abort);
    return threadView(this.d.db, r.thread);
  }

  /** What a request of `operation` would cost at most; enqueues nothing. */
  dryRun(operation: string, input: unknown) {
    return dryRun(this.d.db, this.ops, this.d.config, operation, input);
  }

  dryRunGenerateAll(projectId: string) {
    const r = SHORTHANDS.generateAll(projectId);
    return this.dryRun(r.operation, r.input);
  }

  operations() {
    return this.ops.list().map(operationSummaryView);
  }

  operation(name: string) {
    return operationDetailView(requireOperation(this.ops, name));
  }

  /** `combine thread <id>`: the thread, its work items, and why it waits (a hold) or is held in doubt. */
  get(threadId: string) {
    const t = getThread(this.d.db, threadId);
    if (!t) throw new CommandError('NOT_FOUND', `no thread "${threadId}"`);
    const hold = holdOf(this.d.db, t, this.d.engine.rateLimitHeldUntil(), this.d.clock.now());
    return { ...threadDetailView(this.d.db, t), in_doubt: inDoubtOf(this.d.db, t), hold };
  }

  list(f: ThreadListFilter): ThreadView[] {
    if (f.afterThreadId != null && !getThread(this.d.db, f.afterThreadId)) {
      throw new CommandError('BAD_REQUEST', `cursor: no thread "${f.afterThreadId}" (pass the thread_id of the last thread of the previous page)`);
    }
    return listThreads(this.d.db, f).map((t) => threadView(this.d.db, t));
  }

  /** Streams a thread's events (and its children's) until it ends; see follow-stream.ts. */
  follow(threadId: string, signal: AbortSignal | undefined): AsyncGenerator<FollowMessage> {
    return followThread(this.d.db, this.d.bus, threadId, signal);
  }
}
