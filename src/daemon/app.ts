/**
 * The composition root: builds one COMBINE_HOME's daemon — storage (SQLite in the home, or Postgres:
 * storage.ts), writer, event bus, model
 * router, engine, scheduler, maintenance, metrics, resource pressure, the canary, the control plane's
 * reader — and the services the router, the HTTP API and the dashboard call.
 * It only wires; what each part does is in its own module. Transport-free, so tests and benchmarks drive
 * it in process.
 */
import { type Clock, systemClock } from '../core/clock.js';
import { type CrashAt, neverCrash } from '../core/crash.js';
import type { Logger } from '../core/logger.js';
import { writeTx } from '../core/tx.js';
import type { Sql } from '../core/sql.js';
import type { Db } from '../db/connection.js';
import { builtinDefinitions } from '../operations/loader.js';
import { OperationRegistry } from '../operations/registry.js';
import { type DaemonConfig, engineSettingsOf, operationSettingsOf } from './config/config.js';
import type { EngineContext } from './engine/leased.js';
import { Engine } from './engine/engine.js';
import { sharedRateLimits } from './engine/shared-rate-limits.js';
import { type EngineEvent, EventBus } from './engine/events.js';
import type { Provider } from './engine/provider.js';
import type { EngineHooks } from './engine/tx.js';
import { flowControlOf, hasBudget } from './config/flow.js';
import { type EventLog, type LogFile, unbufferedEventLog } from './runtime/logger.js';
import { daemonMetricsSource, Metrics } from './runtime/metrics.js';
import { listenToOtherDaemons, notificationsOf, RemoteChanges } from './runtime/cluster-changes.js';
import { finalizeRunsOfThreads } from './scheduler/finalize.js';
import { Scheduler } from './scheduler/scheduler.js';
import { ScheduleService } from './scheduler/service.js';
import { AdminService } from './services/admin.js';
import type { Services } from './services/index.js';
import { LedgerService } from './services/ledger.js';
import { ProjectService } from './services/projects.js';
import { ThreadService } from './services/threads.js';
import { reportStorageChanges, StorageGuard } from './runtime/storage-guard.js';
import { WriteHealth } from './runtime/write-health.js';
import { daemonOwner } from './runtime/owner.js';
import { DaemonRegistry, sharedLimitsOf } from './runtime/daemon-registry.js';
import { OwnProjects } from '../domain/project-owners.js';
import { canaryDefinition, submitCanary } from './canary/canary-operation.js';
import { CanaryService } from './canary/service.js';
import { ControlPlaneReader } from './control-plane/reader.js';
import { type DaemonStorage, type Listening, openDaemonStorage, type StorageMaintenance } from './storage.js';
import type { PressureMonitor } from './pressure/monitor.js';
import { createPressureMonitor } from './pressure/wiring.js';
import type { ModelRouter } from './routing/router.js';
import { createModelRouter } from './routing/wiring.js';
import { noTracer } from './tracing/tracer.js';
import type { Tracer } from './tracing/types.js';

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
  /** Crash tests' hook (daemon/test-hooks.ts); a no-op unless given. */
  crashAt?: CrashAt;
  /** Spans (OTLP export when config `otel.endpoint` is set; see tracing/tracer.ts); none if absent. */
  tracer?: Tracer;
}

export class App implements Services {
  /**
   * Every read that is not part of a write. SQLite: a second, read-only connection (WAL gives it the
   * last commit, never a batch the writer has not committed or will roll back); Postgres: a pool.
   */
  readonly reader: Sql;
  private readonly store: DaemonStorage<EngineEvent>;
  readonly bus: EventBus;
  readonly engine: Engine;
  readonly scheduler: Scheduler;
  readonly metrics: Metrics;
  readonly storage: StorageGuard;
  readonly threads: ThreadService;
  readonly projects: ProjectService;
  readonly ledger: LedgerService;
  readonly schedules: ScheduleService;
  readonly admin: AdminService;
  /** Logical model → real model and endpoint, each endpoint with its client and breaker. */
  readonly router: ModelRouter;
  /** CPU, memory, battery and WAL pressure: slower claims, paused bulk work, refused commands. */
  readonly pressure: PressureMonitor;
  readonly canary: CanaryService;
  /** `ledger verify`, `ledger export` and prune dry runs, off the event loop (control-plane/reader.ts). */
  private readonly controlPlane: ControlPlaneReader;
  private readonly tracer: Tracer;
  private readonly maintenance: StorageMaintenance;
  private readonly eventLog: EventLog;
  /** Other daemons' changes on a shared database (Postgres): what `--follow` streams re-read on. */
  private readonly remote = new RemoteChanges();
  /** The shared database's registry of daemons and their limits; null on SQLite (one daemon per database). */
  private readonly registry: DaemonRegistry | null;
  private listening: Pick<Listening, 'close'> | null = null;
  private readonly logger: Logger;

  /** The SQLite writer's connection, for in-process tests and benchmarks that look at stored rows; SQLite only. */
  get db(): Db {
    if (!this.store.sqliteDb) throw new Error('App.db: the daemon runs on Postgres (read through App.reader)');
    return this.store.sqliteDb;
  }

  constructor(o: AppOptions) {
    const { config, logger } = o;
    this.logger = logger;
    const clock = o.clock ?? systemClock;
    const eventLog = (this.eventLog = o.eventLog ?? unbufferedEventLog(logger));
    this.bus = new EventBus(() => eventLog.flush());
    const operations = o.operations ?? new OperationRegistry(builtinDefinitions(), operationSettingsOf(config), [canaryDefinition()]);
    const router = (this.router = createModelRouter(config, o.provider));
    const tracer = (this.tracer = o.tracer ?? noTracer);
    const wake = () => this.engine.wake();
    this.storage = new StorageGuard({ ...config.storage, dir: config.home, logFile: o.logFile, onChange: reportStorageChanges(logger, wake) });
    const writeHealth = new WriteHealth(logger, this.storage);
    const store = (this.store = openDaemonStorage<EngineEvent>(config, logger, {
      publish: (events) => this.bus.publish(events),
      onCommit: (info) => {
        this.metrics.observeCommit(info.commitMs);
        this.maintenance.noteActivity();
      },
      onInfraFailure: (err) => writeHealth.failed(err),
      onInfraRecovered: () => writeHealth.recovered(),
      notificationsOf,
    }));
    const { writer } = store;
    const reader = (this.reader = store.reader);
    // A scheduled run ends with its thread, in the thread's transaction (lease-then-LLM's finalize).
    const hooks: EngineHooks = {
      threadsEnded: (tx, threads, status) => finalizeRunsOfThreads(tx, threads, status),
      budgeted: (projectId) => hasBudget(config.flow, projectId),
    };
    const write = writeTx(writer, clock, hooks);
    const crashAt = o.crashAt ?? neverCrash;
    const { owner, homePrefix } = daemonOwner(config.home);
    // Several daemons share one database: rate limits and 429 parks live in it, not in one process, and
    // each claims its own projects first, as the registry's claiming daemons share them out.
    const owners = store.exclusive ? null : new OwnProjects(owner);
    const flow = flowControlOf(config.flow, operations, router, owners ? sharedRateLimits : null, owners);
    const ctx: EngineContext = {
      owner,
      routeOf: (logical) => router.route(logical),
      operations,
      cache: config.cache,
      random: o.random ?? Math.random,
      priceOf: (key) => router.priceOf(key),
      crashAt,
    };
    this.registry = store.exclusive
      ? null
      : new DaemonRegistry({
          write: (fn) => writer.write((sql) => fn(sql, clock.now())),
          owner,
          homePrefix,
          limits: sharedLimitsOf(config.flow, router.routes()),
          logger,
          claiming: () => this.engine.claimsBulk(),
          onClaimingDaemons: (claiming) => owners?.setDaemons(claiming),
        });
    const walPath = `${config.dbPath}-wal`;
    const gauges = daemonMetricsSource(reader, clock, () => this, walPath);
    this.metrics = new Metrics(
      gauges,
      config.flow.prices,
      router.routes().map((r) => r.key),
    );
    const throttle = { claimLimits: () => this.pressure.claimLimits() };
    this.engine = new Engine({
      reader,
      write,
      ctx,
      clock,
      logger,
      flow,
      tracer,
      throttle,
      storage: this.storage,
      observer: this.metrics,
      exclusive: store.exclusive,
      homePrefix,
      ...engineSettingsOf(config),
    });
    this.maintenance = store.maintenance({ logger, clock, calls: this.engine, observer: this.metrics });
    this.pressure = createPressureMonitor({ config, clock, logger, maintenance: this.maintenance, onRelief: wake });
    const submitOne = async () => {
      const r = await write((tx) => submitCanary(tx, operations));
      if (!r.deduplicated) wake();
      return { thread_id: r.thread.id };
    };
    this.canary = new CanaryService({ ...config.canary, clock, logger, submit: submitOne, subscribe: (listener) => this.bus.subscribe(listener) });
    this.controlPlane = new ControlPlaneReader(store.readTarget);
    const schedulerClock = o.schedulerClock ?? clock;
    const scheduleWrite = writeTx(writer, schedulerClock, hooks);
    const { maxQueued } = config.flow;
    const scheduling = { reader, write: scheduleWrite, clock: schedulerClock, logger, owner, operations, crashAt, maxQueued, onWorkQueued: wake };
    this.scheduler = new Scheduler({ ...scheduling, ...config.scheduler });
    const { engine, storage, maintenance, metrics, pressure, canary, controlPlane } = this;
    // Only a shared database has other daemons whose changes a follower must hear of.
    const remote = store.exclusive ? undefined : this.remote;
    this.threads = new ThreadService({ reader, write, clock, ctx, engine, bus: this.bus, remote, config, router, pressure, tracer });
    this.projects = new ProjectService(reader, write, operations, pressure);
    this.ledger = new LedgerService(reader, write, clock, controlPlane, pressure);
    this.schedules = new ScheduleService(reader, scheduleWrite, schedulerClock, this.scheduler, operations);
    this.admin = new AdminService({
      reader,
      migrations: () => store.migrations(),
      databaseLocation: store.location,
      write,
      clock,
      config,
      logger,
      engine,
      storage,
      writeHealth,
      maintenance,
      metrics,
      operations,
      router,
      pressure,
      canary,
      controlPlane,
    });
    this.bus.subscribe((e) => eventLog.log(e));
    this.bus.subscribe((e) => metrics.observeEvent(e));
  }

  /**
   * On a shared database, registers this daemon with the limits it enforces; throws ConfigError if a
   * live daemon enforces other limits (runtime/daemon-registry.ts). Before anything is served or claimed.
   */
  async joinSharedDatabase(): Promise<void> {
    await this.registry?.join();
  }

  /** Recovery scan and engine first, then the scheduler's first tick (which catches up missed periods). */
  async start(): Promise<void> {
    // Pressure and storage first: the registry's first renewal says whether this daemon claims bulk work.
    this.storage.start();
    this.pressure.start();
    await this.registry?.start();
    await this.engine.start();
    // After the recovery scan: another daemon's notification wakes a producer that has recovered.
    this.listening = await listenToOtherDaemons(this.store, {
      wake: () => this.engine.wake(),
      wakeIfWorkQueued: () => this.engine.wakeIfWorkQueued(),
      abortThreads: (ids) => this.engine.abortThreads(ids),
      remote: this.remote,
      logger: this.logger,
    });
    this.maintenance.start();
    await this.scheduler.start();
    this.canary.start();
  }

  /**
   * Stops claiming (on a shared database, leaves its projects to the other daemons at once), drains
   * in-flight calls up to `drainMs`, flushes the writer and closes the database.
   */
  async shutdown(drainMs: number): Promise<{ abandoned: number }> {
    this.storage.stop();
    this.pressure.stop();
    this.canary.stop();
    await this.listening?.close();
    this.maintenance.stop();
    await this.scheduler.stop();
    // The engine stops claiming at once; the registry says so before the drain (not after it), so the
    // other daemons serve this one's projects while it finishes its calls. That write never holds the
    // shutdown longer than the drain does; a forced one (no drain) skips it, as leave() follows at once.
    const drained = this.engine.stop(drainMs);
    if (drainMs > 0) await Promise.race([this.registry?.renewNow(), drained]);
    const result = await drained;
    await this.registry?.leave().catch((err: unknown) => this.logger.warn({ err }, 'could not unregister from the shared database'));
    await this.controlPlane.close();
    await this.tracer.shutdown();
    await this.store.close();
    this.eventLog.close();
    return result;
  }
}
