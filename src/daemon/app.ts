/**
 * The daemon's application object: the database, its single writer, the engine and the event bus for
 * one COMBINE_HOME, and the operations the router exposes. Transport-free, so tests and benchmarks can
 * drive it in-process.
 */
import { randomUUID } from 'node:crypto';
import type { Db } from '../db/connection.js';
import { openDatabase } from '../db/connection.js';
import { forgetDocuments } from '../db/document-cache.js';
import { applyMigrations } from '../db/migrate.js';
import { listDocumentHeads, listProjects } from '../db/projects.js';
import { getThread, listThreads, type ThreadListFilter } from '../db/threads.js';
import { Writer } from '../db/writer.js';
import { SHORTHANDS } from '../operations/builtin/index.js';
import { builtinDefinitions } from '../operations/loader.js';
import { OperationRegistry } from '../operations/registry.js';
import { cancelThread, CommandError, importProject, retryThread } from './commands.js';
import { operationSettingsOf, type DaemonConfig } from './config.js';
import { readBriefing, readDocument } from './documents.js';
import { operationDetailView, operationSummaryView } from './operation-views.js';
import { requireOperation, submitOperation, type SubmitOptions } from './submit.js';
import { systemClock, type Clock, type Engine } from './engine/engine.js';
import { createEngine } from './engine/wiring.js';
import type { Tx } from './engine/tx.js';
import { EventBus, type EngineEvent } from './events.js';
import { followThread, type FollowMessage } from './follow-stream.js';
import { resolveScheduleId, resolveThreadId } from './id-resolver.js';
import { checkHealth } from './health.js';
import { holdOf, inDoubtOf } from './holds.js';
import { importLedger } from './ledger-transfer.js';
import { applyReplay, planReplay, type ReplayReport } from './replay.js';
import type { EventLog, LogFile, Logger } from './logger.js';
import { createStorageGuard, type StorageGuard } from './storage-guard.js';
import { Maintenance } from './maintenance.js';
import { Metrics } from './metrics.js';
import { runPrune } from './retention.js';
import type { Provider } from './provider.js';
import { canaryDefinition, submitCanary } from './canary/canary-operation.js';
import { CanaryService } from './canary/service.js';
import { ControlPlaneReader } from './control-plane/reader.js';
import { createPressureMonitor } from './pressure/wiring.js';
import type { PressureMonitor } from './pressure/monitor.js';
import type { ModelRouter } from './routing/router.js';
import { threadModelsView } from './routing/thread-models.js';
import { createModelRouter, routeKeysOf } from './routing/wiring.js';
import { noTracer, traceCommand, type Tracer } from './tracing/tracer.js';
import { configView, dryRun, usageReport } from './usage-views.js';
import { Scheduler } from './scheduler/scheduler.js';
import { ScheduleService } from './scheduler/service.js';
import { backlogView, childViews, documentHeadView, documentView, MAX_LEDGER_VIEW_ENTRIES, projectView, statsView, threadDetailView, threadLedgerView, threadView, type CommandView, type ThreadView } from './views.js';

export type { FollowMessage };

declare const __COMBINE_VERSION__: string;
export const VERSION = typeof __COMBINE_VERSION__ === 'string' ? __COMBINE_VERSION__ : '0.0.0-dev';

/** What a user's request says (`traceparent`: the caller's W3C trace context, if any); the daemon adds its own limits (max_queued). */
export type RequestOptions = Omit<SubmitOptions, 'maxQueued' | 'traceparent'> & { traceparent?: string | null };

export interface AppOptions {
  config: DaemonConfig;
  logger: Logger;
  /** Where engine events are logged (batched per commit); the main logger, line by line, if absent. */
  eventLog?: EventLog;
  clock?: Clock;
  /** The scheduler's clock, if not `clock` (a test drives periods without moving the engine's time). */
  schedulerClock?: Clock;
  provider?: Provider;
  random?: () => number;
  /** The operations this daemon runs (built-ins and the home's modules); the built-ins alone if absent. */
  operations?: OperationRegistry;
  /** The log file both loggers write (its dropped-line count shows in health). */
  logFile?: LogFile;
  /** Spans (OTLP export when config `otel.endpoint` is set; see tracing/tracer.ts); none if absent. */
  tracer?: Tracer;
}

/** `threads` filters as clients pass them: ids as typed (resolved by `threads`), an age instead of a time. */
export type ThreadsQuery = Omit<ThreadListFilter, 'since'> & { sinceMs?: number | null };

export class App {
  readonly db: Db;
  readonly writer: Writer<EngineEvent>;
  readonly bus = new EventBus();
  readonly engine: Engine;
  readonly scheduler: Scheduler;
  readonly schedules: ScheduleService;
  readonly metrics: Metrics;
  readonly maintenance: Maintenance;
  readonly operations: OperationRegistry;
  /** Free space of the home: claiming pauses under the threshold or after a disk-full write. */
  readonly storage: StorageGuard;
  /** Logical model → real model and endpoint, each endpoint with its client and breaker. */
  readonly router: ModelRouter;
  /** CPU, memory, battery and WAL pressure: slower claims, paused bulk work, refused commands. */
  readonly pressure: PressureMonitor;
  readonly canary: CanaryService;
  /** `ledger verify`, `ledger export` and prune dry runs, off the event loop (control-plane/reader.ts). */
  private readonly reader: ControlPlaneReader;
  private readonly tracer: Tracer;
  readonly owner = randomUUID();
  readonly startedAt = Date.now();
  private readonly clock: Clock;
  private readonly eventLog: EventLog;
  infraHealthy = true;

  constructor(private readonly o: AppOptions) {
    this.clock = o.clock ?? systemClock;
    this.eventLog = o.eventLog ?? { logger: o.logger, flush() {}, close() {} };
    this.db = openDatabase(o.config.dbPath, { busyTimeoutMs: o.config.busyTimeoutMs });
    applyMigrations(this.db, o.config.migrationsDir ?? undefined);
    this.storage = createStorageGuard({ ...o.config.storage, dir: o.config.home, logger: o.logger, droppedLogLines: () => o.logFile?.dropped ?? 0, onRoom: () => this.engine.wake() });
    this.writer = new Writer<EngineEvent>(this.db, {
      publish: (events) => {
        this.bus.publish(events);
        this.eventLog.flush();
      },
      onCommit: (info) => {
        this.metrics.observeCommit(info.commitMs);
        this.maintenance.noteActivity();
      },
      onRollback: () => forgetDocuments(this.db),
      onInfraFailure: (err) => {
        this.storage.noteWriteFailure(err);
        // One line per outage, not one per failed batch.
        if (this.infraHealthy) o.logger.error({ err }, 'storage failure: writes are failing after retries; health is unready');
        this.infraHealthy = false;
      },
      onInfraRecovered: () => {
        this.infraHealthy = true;
        o.logger.warn('storage recovered; health is ready again');
      },
    });
    const router = (this.router = createModelRouter(o.config, o.provider));
    this.metrics = new Metrics(this);
    this.tracer = o.tracer ?? noTracer;
    const operations = o.operations ?? new OperationRegistry(builtinDefinitions(), operationSettingsOf(o.config), [canaryDefinition()]);
    this.operations = operations;
    this.engine = createEngine({
      ...{ db: this.db, writer: this.writer, clock: this.clock, logger: o.logger, owner: this.owner, config: o.config, operations, router },
      ...{ tracer: this.tracer, throttle: { claimLimits: () => this.pressure.claimLimits() }, storage: this.storage, random: o.random ?? Math.random, observer: this.metrics },
    });
    this.maintenance = new Maintenance({
      db: this.db,
      writer: this.writer as Writer<unknown>,
      walPath: `${o.config.dbPath}-wal`,
      logger: o.logger,
      clock: this.clock,
      idleMs: o.config.maintenanceIdleMs,
      busy: () => this.engine.inFlightCount > 0,
      onRun: (r) => this.metrics.onMaintenance(r),
    });
    this.pressure = createPressureMonitor({ config: o.config, clock: this.clock, logger: o.logger, maintenance: this.maintenance, onRelief: () => this.engine.wake() });
    const submit = async () => ({ thread_id: (await this.writeAndWake((tx) => submitCanary(tx, operations))).thread.id });
    this.canary = new CanaryService({ ...o.config.canary, clock: this.clock, logger: o.logger, submit, subscribe: (listener) => this.bus.subscribe(listener) });
    this.reader = new ControlPlaneReader({ dbPath: o.config.dbPath, busyTimeoutMs: o.config.busyTimeoutMs });
    const schedulerClock = o.schedulerClock ?? this.clock;
    this.scheduler = new Scheduler({
      db: this.db,
      writer: this.writer,
      clock: schedulerClock,
      logger: o.logger,
      owner: this.owner,
      staleAfterMs: o.config.scheduler.staleAfterMs,
      misfireGraceMs: o.config.scheduler.misfireGraceMs,
      operations,
      maxQueued: o.config.flow.maxQueued,
      onWorkQueued: () => this.engine.wake(),
      crashAt: o.config.crashAt,
    });
    const scheduleWrite = <T>(fn: (tx: Tx) => T) => this.writer.write((db, emit) => fn({ db, emit, now: schedulerClock.now() }));
    this.schedules = new ScheduleService(this.db, scheduleWrite, schedulerClock, this.scheduler, operations);
    this.bus.subscribe((e) => this.logEvent(e));
    this.bus.subscribe((e) => this.metrics.observeEvent(e));
  }

  get config(): DaemonConfig {
    return this.o.config;
  }

  /** Recovery scan and engine first, then the scheduler's first tick (which catches up missed periods). */
  async start(): Promise<void> {
    this.storage.start();
    this.pressure.start();
    await this.engine.start();
    this.maintenance.start();
    await this.scheduler.start();
    this.canary.start();
  }

  /** Stops claiming, drains in-flight calls up to `drainMs`, flushes the writer and closes the database. */
  async shutdown(drainMs: number): Promise<{ abandoned: number }> {
    this.storage.stop();
    this.pressure.stop();
    this.canary.stop();
    this.maintenance.stop();
    await this.scheduler.stop();
    const result = await this.engine.stop(drainMs);
    await this.reader.close();
    await this.tracer.shutdown();
    await this.writer.close();
    this.eventLog.close();
    this.db.close();
    return result;
  }

  private write<T>(fn: (tx: Tx) => T): Promise<T> {
    return this.writer.write((db, emit) => fn({ db, emit, now: this.clock.now() }));
  }

  private logEvent(e: EngineEvent): void {
    const { type, ...fields } = e;
    // Every engine line carries thread_id and work_item_id (null for thread-level events).
    this.eventLog.logger.info({ component: 'engine', event: type, work_item_id: null, ...fields }, `${type} ${'status' in e ? e.status : e.entry_type}`);
  }

  private commandView(r: { thread: { id: string; status: string }; deduplicated: boolean; superseded?: string }): CommandView {
    return { thread_id: r.thread.id, status: r.thread.status, deduplicated: r.deduplicated, ...(r.superseded ? { superseded_thread_id: r.superseded } : {}) };
  }

  /** A command that adds work: refused while the WAL is over its limit (BACKPRESSURE), nothing stored. */
  private async writeAndWake<T extends { deduplicated: boolean }>(fn: (tx: Tx) => T): Promise<T> {
    const r = await this.write(fn);
    if (!r.deduplicated) this.engine.wake();
    return r;
  }

  /** The thread a typed id (whole, or a unique prefix of it or of its short form) names; see id-resolver.ts. */
  threadId(text: string): string {
    return resolveThreadId(this.db, text);
  }

  /** A page cursor names a thread the previous page listed: an unknown one is bad input, not a missing thing. */
  private cursorThreadId(text: string): string {
    try {
      return this.threadId(text);
    } catch (err) {
      if (err instanceof CommandError && err.kind === 'NOT_FOUND') {
        throw new CommandError('BAD_REQUEST', `cursor: no thread "${text}" (pass the thread_id of the last thread of the previous page)`);
      }
      throw err;
    }
  }

  scheduleId(text: string): string {
    return resolveScheduleId(this.db, text);
  }

  // --- commands -------------------------------------------------------------------------------

  importProject(file: unknown) {
    this.pressure.assertAcceptingCommands();
    return this.write((tx) => importProject(tx, file));
  }

  /**
   * Requests one run of `operation` with `input` (the generic command: `combine run`, and HTTP's
   * `POST /commands/run/{operation}`). Refuses an unknown operation or invalid input (nothing stored);
   * answers `deduplicated: true` with the thread already doing (or, unless `force`, done with) it.
   */
  async run(operation: string, input: unknown, opts: RequestOptions): Promise<CommandView> {
    this.pressure.assertAcceptingCommands();
    // The command's span: its context is what the thread stores, the parent of every later span.
    return traceCommand(this.tracer, this.clock, operation, opts.traceparent ?? null, async (traceparent) => {
      const o = { ...opts, maxQueued: this.config.flow.maxQueued, traceparent };
      return this.commandView(await this.writeAndWake((tx) => submitOperation(tx, this.operations, operation, input, o)));
    });
  }

  generateEpic(projectId: string, epicId: string, opts: RequestOptions): Promise<CommandView> {
    const { operation, input } = SHORTHANDS.generateEpic(projectId, epicId);
    return this.run(operation, input, opts);
  }

  generateAll(projectId: string, opts: RequestOptions): Promise<CommandView> {
    const { operation, input } = SHORTHANDS.generateAll(projectId);
    return this.run(operation, input, opts);
  }

  async retry(typedId: string): Promise<ThreadView> {
    this.pressure.assertAcceptingCommands();
    const threadId = this.threadId(typedId);
    const t = await this.write((tx) => retryThread(tx, this.operations, threadId, this.config.flow.maxQueued));
    // "Retry" means now: a 429 hold of its models (up to retry.max_provider_wait) is lifted too.
    this.engine.releaseRateLimitHold(routeKeysOf(this.router, this.operations, t.kind));
    return threadView(this.db, t);
  }

  /** `combine replay`: a report (read-only), or with `apply` the recorded answer queued for application. */
  async replay(typedId: string, o: { apply: boolean; responseSeq: number | null }): Promise<ReplayReport> {
    const threadId = this.threadId(typedId);
    if (!o.apply) return planReplay(this.db, this.operations, threadId, o.responseSeq);
    this.pressure.assertAcceptingCommands();
    const r = await this.write((tx) => applyReplay(tx, this.operations, threadId, o.responseSeq));
    this.engine.wake();
    return r;
  }

  async cancel(typedId: string): Promise<ThreadView> {
    const threadId = this.threadId(typedId);
    const r = await this.write((tx) => cancelThread(tx, this.engine.ctx, threadId));
    this.engine.abort(r.abort);
    return threadView(this.db, r.thread);
  }

  // --- queries --------------------------------------------------------------------------------

  usage(projectId: string | null) {
    return usageReport(this.db, this.config, projectId, this.clock.now());
  }

  /** What a request of `operation` would cost at most; enqueues nothing. */
  dryRun(operation: string, input: unknown) {
    return dryRun(this.db, this.operations, this.config, operation, input);
  }

  dryRunGenerateAll(projectId: string) {
    const r = SHORTHANDS.generateAll(projectId);
    return this.dryRun(r.operation, r.input);
  }

  operationList() {
    return this.operations.list().map(operationSummaryView);
  }

  operation(name: string) {
    return operationDetailView(requireOperation(this.operations, name));
  }

  /** Any document of a project: `key` null is the type's one document, or the newest keyed one. */
  document(projectId: string, docType: string, key: string | null) {
    return documentView(readDocument(this.db, this.operations, { projectId, docType, key }));
  }

  /** A project's documents, without their content (the dashboard's project page, `GET /projects/{id}/documents`). */
  documents(projectId: string, limit = 500) {
    this.project(projectId); // 404 for an unknown project, not an empty list
    return listDocumentHeads(this.db, projectId, limit).map(documentHeadView);
  }

  /** `combine briefing`: a project's briefing document for a date (the newest when null). */
  briefing(projectId: string, date: string | null) {
    return readBriefing(this.db, this.operations, projectId, date);
  }

  configShow() {
    return configView(this.config, this.operations, this.router);
  }

  /** `combine thread`: the thread, its work items, what it waits for, its trace, and the models its calls used. */
  thread(typedId: string) {
    const t = getThread(this.db, this.threadId(typedId))!;
    const hold = holdOf(this.db, t, this.engine.rateLimitHeldUntil(routeKeysOf(this.router, this.operations, t.kind)), this.clock.now());
    return { ...threadDetailView(this.db, t), in_doubt: inDoubtOf(this.db, t), hold, traceparent: t.traceparent, ...threadModelsView(this.db, t.id) };
  }

  /** An orchestration's children with their latest error (empty for a thread without children). */
  threadChildren(typedId: string) {
    return childViews(this.db, this.threadId(typedId));
  }

  /**
   * Newest first, one page. `parentId` and `afterThreadId` (the last thread of the previous page) are
   * ids as typed — whole, short or a unique prefix — and resolved here; `sinceMs`: created within it.
   */
  threads(f: ThreadsQuery): ThreadView[] {
    const { sinceMs, ...filter } = f;
    return listThreads(this.db, {
      ...filter,
      parentId: f.parentId != null ? this.threadId(f.parentId) : null,
      afterThreadId: f.afterThreadId != null ? this.cursorThreadId(f.afterThreadId) : null,
      since: sinceMs != null ? this.clock.now() - sinceMs : null,
    }).map((t) => threadView(this.db, t));
  }

  ledger(typedId: string) {
    const threadId = this.threadId(typedId);
    const view = threadLedgerView(this.db, threadId);
    if (view) return view;
    throw new CommandError('BAD_REQUEST', `thread ${threadId} and its children have more than ${MAX_LEDGER_VIEW_ENTRIES} ledger entries: read one child at a time (combine thread ${threadId} lists them), or write them all with \`combine ledger export ${threadId}\``, 'TOO_MANY_ENTRIES');
  }

  verifyLedger() {
    return this.reader.run('verifyLedger', undefined);
  }

  exportLedger(scope: { threadId: string | null; projectId: string | null }) {
    const threadId = scope.threadId === null ? null : this.threadId(scope.threadId);
    return this.reader.run('exportLedger', { scope: { ...scope, threadId }, now: this.clock.now() });
  }

  importLedger(text: string) {
    this.pressure.assertAcceptingCommands();
    return this.write((tx) => importLedger(tx, text));
  }

  projects() {
    return listProjects(this.db).map((p) => projectView(this.db, p.id)!);
  }

  project(projectId: string) {
    const view = projectView(this.db, projectId);
    if (!view) throw new CommandError('NOT_FOUND', `no project "${projectId}" (see \`combine project list\`)`);
    return view;
  }

  backlog(projectId: string) {
    const view = backlogView(this.db, projectId);
    if (!view) throw new CommandError('NOT_FOUND', `no project "${projectId}" (see \`combine project list\`)`);
    return view;
  }

  status() {
    return {
      pid: process.pid,
      socket: this.o.config.socketPath,
      version: VERSION,
      uptime_s: Math.round((Date.now() - this.startedAt) / 1000),
      db_path: this.o.config.dbPath,
    };
  }

  health() {
    return checkHealth({
      db: this.db,
      writer: this.writer as Writer<unknown>,
      migrationsFolder: this.o.config.migrationsDir ?? undefined,
      infraHealthy: this.infraHealthy,
      recoveryDone: this.engine.recoveryDone,
      breakers: this.router.breakerSnapshots(),
      storage: this.storage.snapshot(),
      rateLimits: this.engine.rateLimitSnapshot(),
      pressure: this.pressure.snapshot(),
      canary: this.canary.snapshot(),
    });
  }

  /** Removes closed threads older than `olderThanMs` (see retention.ts), then returns freed pages. */
  prune(olderThanMs: number, dryRun: boolean) {
    const preview = (cutoff: number) => this.reader.run('previewPrune', { cutoff });
    return runPrune({ write: (fn) => this.write(fn), preview, logger: this.o.logger, maintenance: this.maintenance }, this.clock.now() - olderThanMs, dryRun);
  }

  stats() {
    return statsView(this.db, this.engine.inFlightCount, this.engine.rateLimitSnapshot());
  }

  /** Streams a thread's history, then its events (and its children's), until it ends; see follow-stream.ts. */
  async *follow(typedId: string, signal: AbortSignal | undefined): AsyncGenerator<FollowMessage> {
    yield* followThread(this.db, this.bus, this.threadId(typedId), signal);
  }
}
