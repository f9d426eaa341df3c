/**
 * The daemon's application object: the database, its single writer, the engine and the event bus for
 * one COMBINE_HOME, and the operations the router exposes. Transport-free, so tests and benchmarks can
 * drive it in-process.
 */
import { randomUUID } from 'node:crypto';
import type { Db } from '../db/connection.js';
import { openDatabase } from '../db/connection.js';
import { forgetDocuments } from '../db/document-cache.js';
import { countLedgerEntries } from '../ledger/store.js';
import { applyMigrations } from '../db/migrate.js';
import { listProjects } from '../db/projects.js';
import { sumCallUsage } from '../db/call-records.js';
import { countThreadsByStatus, getThread, listThreads, type ThreadListFilter } from '../db/threads.js';
import { countWorkItemsByStatus } from '../db/work-items.js';
import { Writer } from '../db/writer.js';
import { SHORTHANDS } from '../operations/builtin/index.js';
import { builtinDefinitions } from '../operations/loader.js';
import { OperationRegistry } from '../operations/registry.js';
import { cancelThread, importProject, retryThread } from './commands.js';
import { operationSettingsOf, type DaemonConfig } from './config.js';
import { readBriefing, readDocument } from './documents.js';
import { operationDetailView, operationSummaryView } from './operation-views.js';
import { requireOperation, submitOperation, type SubmitOptions } from './submit.js';
import type { CompleterContext } from './engine/completer.js';
import { Engine } from './engine/engine.js';
import type { Tx } from './engine/tx.js';
import { EventBus, type EngineEvent } from './events.js';
import { followThread, type FollowMessage } from './follow-stream.js';
import { checkHealth } from './health.js';
import { holdOf, inDoubtOf } from './holds.js';
import { verifyLedger } from '../ledger/verify.js';
import { exportLedger, importLedger } from '../ledger/transfer.js';
import { applyReplay, planReplay, type ReplayReport } from '../ledger/replay.js';
import type { EventLog, LogFile, Logger } from './logger.js';
import { StorageGuard } from './storage-guard.js';
import { Maintenance } from './maintenance.js';
import { Metrics } from './metrics.js';
import { runPrune } from './retention.js';
import { createOpenAIProvider, type Provider } from './provider.js';
import { FairScheduler } from '../domain/fair-scheduler.js';
import { RateLimiter } from '../domain/rate-limit.js';
import { budgetFor, rateLimitsFor } from './flow-config.js';
import { configView, dryRun, usageReport } from './usage-views.js';
import { Scheduler } from './scheduler/scheduler.js';
import { ScheduleService } from './scheduler/service.js';
import { backlogView, documentView, projectView, threadDetailView, threadLedgerView, threadView, type CommandView, type ThreadView } from './views.js';
import { CommandError } from '../core/errors.js';
import { systemClock, type Clock } from '../core/clock.js';

export type { FollowMessage };

declare const __COMBINE_VERSION__: string;
export const VERSION = typeof __COMBINE_VERSION__ === 'string' ? __COMBINE_VERSION__ : '0.0.0-dev';

/** What a user's request says; the daemon adds its own limits (max_queued). */
export type RequestOptions = Omit<SubmitOptions, 'maxQueued'>;

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
}

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
  readonly owner = randomUUID();
  readonly startedAt = Date.now();
  private readonly clock: Clock;
  private readonly ctx: CompleterContext;
  private readonly eventLog: EventLog;
  infraHealthy = true;

  constructor(private readonly o: AppOptions) {
    this.clock = o.clock ?? systemClock;
    this.eventLog = o.eventLog ?? { logger: o.logger, flush() {}, close() {} };
    this.db = openDatabase(o.config.dbPath, { busyTimeoutMs: o.config.busyTimeoutMs });
    applyMigrations(this.db, o.config.migrationsDir ?? undefined);
    this.metrics = new Metrics(this);
    this.storage = new StorageGuard({
      ...o.config.storage,
      dir: o.config.home,
      droppedLogLines: () => o.logFile?.dropped ?? 0,
      onChange: (state, snapshot) => {
        if (state === 'ok') {
          o.logger.warn({ storage: snapshot }, 'storage has room again: claiming resumes');
          this.engine.wake();
        } else o.logger.error({ storage: snapshot }, `storage: ${snapshot.status}; no new provider calls start until there is room`);
      },
    });
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
    const provider = o.provider ?? createOpenAIProvider(o.config.provider);
    const operations = o.operations ?? new OperationRegistry(builtinDefinitions(), operationSettingsOf(o.config));
    this.operations = operations;
    const flow = o.config.flow;
    const priceOf = (model: string) => flow.prices[model];
    this.ctx = {
      owner: this.owner,
      endpoint: provider.endpoint,
      operations,
      cache: o.config.cache,
      random: o.random ?? Math.random,
      priceOf,
    };
    this.engine = new Engine({
      db: this.db,
      writer: this.writer,
      provider,
      clock: this.clock,
      logger: o.logger,
      owner: this.owner,
      maxInFlight: o.config.maxInFlight,
      callTimeoutMs: o.config.provider.callTimeoutMs,
      operations,
      cache: o.config.cache,
      recoveryIntervalMs: o.config.recoveryIntervalMs,
      breaker: o.config.breaker,
      flow: {
        scheduler: new FairScheduler({ weights: flow.projectWeights, defaultWeight: flow.defaultWeight, agingStepMs: flow.agingStepMs }),
        limiter: new RateLimiter((model) => rateLimitsFor(flow, model)),
        budgetFor: (projectId) => budgetFor(flow, projectId),
        priceOf,
        operations,
      },
      secrets: o.config.secrets,
      maxProviderWaitMs: o.config.maxProviderWaitMs,
      storage: this.storage,
      random: this.ctx.random,
      crashAt: o.config.crashAt,
      observer: this.metrics,
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
    await this.engine.start();
    this.maintenance.start();
    await this.scheduler.start();
  }

  /** Stops claiming, drains in-flight calls up to `drainMs`, flushes the writer and closes the database. */
  async shutdown(drainMs: number): Promise<{ abandoned: number }> {
    this.storage.stop();
    this.maintenance.stop();
    await this.scheduler.stop();
    const result = await this.engine.stop(drainMs);
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

  private commandView(r: { thread: { id: string; status: string }; deduplicated: boolean }): CommandView {
    return { thread_id: r.thread.id, status: r.thread.status, deduplicated: r.deduplicated };
  }

  // --- commands -------------------------------------------------------------------------------

  importProject(file: unknown) {
    return this.write((tx) => importProject(tx, file));
  }

  /**
   * Requests one run of `operation` with `input` (the generic command: `combine run`, and HTTP's
   * `POST /commands/run/{operation}`). Refuses an unknown operation or invalid input (nothing stored);
   * answers `deduplicated: true` with the thread already doing (or, unless `force`, done with) it.
   */
  async run(operation: string, input: unknown, opts: RequestOptions): Promise<CommandView> {
    const o = { ...opts, maxQueued: this.config.flow.maxQueued };
    const r = await this.write((tx) => submitOperation(tx, this.operations, operation, input, o));
    if (!r.deduplicated) this.engine.wake();
    return this.commandView(r);
  }

  generateEpic(projectId: string, epicId: string, opts: RequestOptions): Promise<CommandView> {
    const { operation, input } = SHORTHANDS.generateEpic(projectId, epicId);
    return this.run(operation, input, opts);
  }

  generateAll(projectId: string, opts: RequestOptions): Promise<CommandView> {
    const { operation, input } = SHORTHANDS.generateAll(projectId);
    return this.run(operation, input, opts);
  }

  async retry(threadId: string): Promise<ThreadView> {
    const t = await this.write((tx) => retryThread(tx, this.operations, threadId, this.config.flow.maxQueued));
    // "Retry" means now: a 429 hold of the model (up to retry.max_provider_wait) is lifted too.
    this.engine.releaseRateLimitHold();
    return threadView(this.db, t);
  }

  /** `combine replay`: a report (read-only), or with `apply` the recorded answer queued for application. */
  async replay(threadId: string, o: { apply: boolean; responseSeq: number | null }): Promise<ReplayReport> {
    if (!o.apply) return planReplay(this.db, this.operations, threadId, o.responseSeq);
    const r = await this.write((tx) => applyReplay(tx, this.operations, threadId, o.responseSeq));
    this.engine.wake();
    return r;
  }

  async cancel(threadId: string): Promise<ThreadView> {
    const r = await this.write((tx) => cancelThread(tx, this.ctx, threadId));
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

  /** `combine briefing`: a project's briefing document for a date (the newest when null). */
  briefing(projectId: string, date: string | null) {
    return readBriefing(this.db, this.operations, projectId, date);
  }

  configShow() {
    return configView(this.config);
  }

  thread(threadId: string) {
    const t = getThread(this.db, threadId);
    if (!t) throw new CommandError('NOT_FOUND', `no thread "${threadId}"`);
    const now = this.clock.now();
    return { ...threadDetailView(this.db, t), in_doubt: inDoubtOf(this.db, t), hold: holdOf(this.db, t, this.engine.rateLimitHeldUntil(), now) };
  }

  threads(f: ThreadListFilter): ThreadView[] {
    if (f.afterThreadId != null && !getThread(this.db, f.afterThreadId)) {
      throw new CommandError('BAD_REQUEST', `cursor: no thread "${f.afterThreadId}" (pass the thread_id of the last thread of the previous page)`);
    }
    return listThreads(this.db, f).map((t) => threadView(this.db, t));
  }

  ledger(threadId: string) {
    if (!getThread(this.db, threadId)) throw new CommandError('NOT_FOUND', `no thread "${threadId}"`);
    return threadLedgerView(this.db, threadId);
  }

  verifyLedger() {
    return verifyLedger(this.db);
  }

  exportLedger(scope: { threadId: string | null; projectId: string | null }) {
    return exportLedger(this.db, scope, this.clock.now());
  }

  importLedger(text: string) {
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
      endpoint: this.engine.endpoint,
      breaker: this.engine.breaker.snapshot(),
      storage: this.storage.snapshot(),
      rateLimits: this.engine.rateLimitSnapshot(),
    });
  }

  /** Removes closed threads older than `olderThanMs` (see retention.ts), then returns freed pages. */
  prune(olderThanMs: number, dryRun: boolean) {
    return runPrune({ db: this.db, write: (fn) => this.write(fn), logger: this.o.logger, maintenance: this.maintenance }, this.clock.now() - olderThanMs, dryRun);
  }

  stats() {
    const byStatus = (rows: { status: string; n: number }[]) => Object.fromEntries(rows.map((r) => [r.status, r.n]));
    const usage = sumCallUsage(this.db);
    return {
      threads: byStatus(countThreadsByStatus(this.db)),
      work_items: byStatus(countWorkItemsByStatus(this.db)),
      in_flight: this.engine.inFlightCount,
      ledger_entries: countLedgerEntries(this.db),
      calls: usage.calls,
      tokens: { prompt: usage.prompt_tokens, completion: usage.completion_tokens },
      rate_limits: this.engine.rateLimitSnapshot(),
    };
  }

  /** Streams a thread's events (and its children's) until it ends; see follow-stream.ts. */
  follow(threadId: string, signal: AbortSignal | undefined): AsyncGenerator<FollowMessage> {
    return followThread(this.db, this.bus, threadId, signal);
  }
}
