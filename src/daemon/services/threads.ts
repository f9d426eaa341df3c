/**
 * The thread service: requests of work (`combine run` and its shorthands), what may be done to a
 * thread afterwards (retry, replay, cancel) and what can be read about threads. Each command is one
 * writer transaction — an acknowledged command is on disk, a refused one stored nothing — after which
 * the engine is told (woken, or asked to abort calls in flight).
 */
import type { Clock } from '../../core/clock.js';
import { CommandError } from '../../core/errors.js';
import type { Sql } from '../../core/sql.js';
import { getThread, listThreads, type ThreadListFilter } from '../../db/threads.js';
import { applyReplay, planReplay, type ReplayReport } from '../../ledger/replay.js';
import { SHORTHANDS } from '../../operations/builtin/index.js';
import type { OperationRegistry } from '../../operations/registry.js';
import type { EngineContext } from '../engine/leased.js';
import type { Engine } from '../engine/engine.js';
import type { RemoteChanges } from '../runtime/cluster-changes.js';
import type { EventBus } from '../engine/events.js';
import type { Write } from '../engine/tx.js';
import { followThread, type FollowMessage } from './follow-stream.js';
import { cancelThread, retryThread } from './commands.js';
import { holdOf, inDoubtOf } from './holds.js';
import { operationDetailView, operationSummaryView } from './operation-views.js';
import { requireOperation, submitOperation } from './submit.js';
import { dryRun } from './usage-views.js';
import type { DaemonConfig } from '../config/config.js';
import { childViews, threadDetailView, threadView, type CommandView, type ThreadView } from '../views.js';
import { resolveThreadId } from './id-resolver.js';
import type { PressureMonitor } from '../pressure/monitor.js';
import type { ModelRouter } from '../routing/router.js';
import { threadModelsView } from '../routing/thread-models.js';
import { routeKeysOf } from '../routing/wiring.js';
import { traceCommand } from '../tracing/tracer.js';
import type { Tracer } from '../tracing/types.js';

/** What a user's request says besides what it asks for; the daemon adds its own limits (max_queued). */
export interface RequestOptions {
  force: boolean;
  /** Unstarted work fails with SKIPPED_DEADLINE this many milliseconds after the request (null: never). */
  deadlineMs: number | null;
  createdBy: string | null;
  /** The caller's W3C trace context (CLI `--traceparent`, the HTTP `traceparent` header); else a new trace. */
  traceparent?: string | null;
}

/** `threads` filters as clients pass them: ids as typed (resolved by `list`), an age instead of a time. */
export type ThreadsQuery = Omit<ThreadListFilter, 'since'> & { sinceMs?: number | null };

export interface ThreadServiceDeps {
  /** Reads outside a write: the last commit (the reader connection). */
  reader: Sql;
  write: Write;
  clock: Clock;
  ctx: EngineContext;
  engine: Pick<Engine, 'wake' | 'abort' | 'releaseRateLimitHold' | 'rateLimitHeldUntil'>;
  bus: EventBus;
  /** Other daemons' changes on a shared database; absent on SQLite. */
  remote?: RemoteChanges;
  config: DaemonConfig;
  /** Logical model → route: which rate-limit holds a thread's calls wait for. */
  router: ModelRouter;
  /** Refuses new commands while the WAL is over its limit (BACKPRESSURE). */
  pressure: Pick<PressureMonitor, 'assertAcceptingCommands'>;
  tracer: Tracer;
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
    this.d.pressure.assertAcceptingCommands();
    // The command's span: its context is what the thread stores, the parent of every later span.
    return traceCommand(this.d.tracer, this.d.clock, operation, o.traceparent ?? null, async (traceparent) => {
      const deadlineAt = o.deadlineMs === null ? null : this.d.clock.now() + o.deadlineMs;
      const opts = { force: o.force, deadlineAt, createdBy: o.createdBy, maxQueued: this.d.config.flow.maxQueued, traceparent };
      const r = await this.d.write((tx) => submitOperation(tx, this.ops, operation, input, opts));
      if (!r.deduplicated) this.d.engine.wake();
      return { thread_id: r.thread.id, status: r.thread.status, deduplicated: r.deduplicated, ...(r.superseded ? { superseded_thread_id: r.superseded } : {}) };
    });
  }

  generateEpic(projectId: string, epicId: string, o: RequestOptions): Promise<CommandView> {
    const { operation, input } = SHORTHANDS.generateEpic(projectId, epicId);
    return this.run(operation, input, o);
  }

  generateAll(projectId: string, o: RequestOptions): Promise<CommandView> {
    const { operation, input } = SHORTHANDS.generateAll(projectId);
    return this.run(operation, input, o);
  }

  /** The thread a typed id (whole, or a unique prefix of it or of its short form) names; see id-resolver.ts. */
  async threadId(text: string): Promise<string> {
    return resolveThreadId(this.d.reader, text);
  }

  /** A page cursor names a thread the previous page listed: an unknown one is bad input, not a missing thing. */
  private async cursorThreadId(text: string): Promise<string> {
    try {
      return await this.threadId(text);
    } catch (err) {
      if (err instanceof CommandError && err.kind === 'NOT_FOUND') {
        throw new CommandError('BAD_REQUEST', `cursor: no thread "${text}" (pass the thread_id of the last thread of the previous page)`);
      }
      throw err;
    }
  }

  async retry(typedId: string): Promise<ThreadView> {
    this.d.pressure.assertAcceptingCommands();
    const threadId = await this.threadId(typedId);
    const t = await this.d.write((tx) => retryThread(tx, this.ops, threadId, this.d.config.flow.maxQueued));
    // "Retry" means now: a 429 hold of its models (up to retry.max_provider_wait) is lifted too.
    this.d.engine.releaseRateLimitHold(routeKeysOf(this.d.router, this.ops, t.kind));
    return await threadView(this.d.reader, t);
  }

  /** `combine replay`: a report (read-only), or with `apply` the recorded answer queued for application. */
  async replay(typedId: string, o: { apply: boolean; responseSeq: number | null }): Promise<ReplayReport> {
    const threadId = await this.threadId(typedId);
    if (!o.apply) return await planReplay(this.d.reader, this.ops, threadId, o.responseSeq);
    this.d.pressure.assertAcceptingCommands();
    const r = await this.d.write((tx) => applyReplay(tx, this.ops, threadId, o.responseSeq));
    this.d.engine.wake();
    return r;
  }

  async cancel(typedId: string): Promise<ThreadView> {
    const threadId = await this.threadId(typedId);
    const r = await this.d.write((tx) => cancelThread(tx, threadId));
    this.d.engine.abort(r.abort);
    return await threadView(this.d.reader, r.thread);
  }

  /** What a request of `operation` would cost at most; enqueues nothing. */
  async dryRun(operation: string, input: unknown) {
    return await dryRun(this.d.reader, this.ops, this.d.config, operation, input);
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

  /** `combine thread <id>`: the thread, its work items, why it waits (a hold) or is held in doubt, its trace, and the models its calls used. */
  async get(typedId: string) {
    const t = (await getThread(this.d.reader, await this.threadId(typedId)))!;
    const hold = await holdOf(this.d.reader, t, this.d.engine.rateLimitHeldUntil(routeKeysOf(this.d.router, this.ops, t.kind)), this.d.clock.now());
    return {
      ...(await threadDetailView(this.d.reader, t)),
      in_doubt: await inDoubtOf(this.d.reader, t),
      hold,
      traceparent: t.traceparent,
      ...(await threadModelsView(this.d.reader, t.id)),
    };
  }

  /** An orchestration's children with their latest error (empty for a thread without children). */
  async children(typedId: string) {
    return await childViews(this.d.reader, await this.threadId(typedId));
  }

  /**
   * Newest first, one page. `parentId` and `afterThreadId` (the last thread of the previous page) are
   * ids as typed — whole, short or a unique prefix — and resolved here; `sinceMs`: created within it.
   */
  async list(f: ThreadsQuery): Promise<ThreadView[]> {
    const { sinceMs, ...filter } = f;
    const rows = await listThreads(this.d.reader, {
      ...filter,
      parentId: f.parentId != null ? await this.threadId(f.parentId) : null,
      afterThreadId: f.afterThreadId != null ? await this.cursorThreadId(f.afterThreadId) : null,
      since: sinceMs != null ? this.d.clock.now() - sinceMs : null,
    });
    const views: ThreadView[] = [];
    for (const t of rows) views.push(await threadView(this.d.reader, t));
    return views;
  }

  /** Streams a thread's history, then its events (and its children's), until it ends; see follow-stream.ts. */
  async *follow(typedId: string, signal: AbortSignal | undefined): AsyncGenerator<FollowMessage> {
    yield* followThread(this.d.reader, this.d.bus, await this.threadId(typedId), signal, this.d.remote);
  }
}
