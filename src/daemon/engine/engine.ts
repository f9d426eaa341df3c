/**
 * The engine loop: claim (producer) → prompt → call (executor) → record → validate/apply (completer),
 * with the recovery scan (rescuer) at start and on an interval. It holds no state that matters for
 * correctness: everything it knows is in the database, so a killed engine resumes from there.
 *
 * Wake-ups are event-driven: a new command, a finished item or the next due time wakes it; nothing
 * polls on a fixed delay.
 */
import type { Sql } from '../../core/sql.js';
import type { LedgerRow } from '../../db/schema.js';
import { getWorkItem, listExpiredLeases, listLeasesNotOwnedBy, nextQueuedDeadline, nextQueuedDueAt, unparkBudgetItems } from '../../db/work-items.js';
import { failLeasedAttempt, finishAnswer, recordResponse, startWorkItem, type EngineContext } from './completer.js';
import { CircuitBreaker, type BreakerPolicy } from './breaker.js';
import { executeCall, type CallOutcome } from './executor.js';
import { learnFromOutcome } from './provider-feedback.js';
import { claimWorkItems, skipItemsPastDeadline, type FlowControl } from './producer.js';
import { extendLeases, rescueLeases, sweepLocksAndParents } from './rescuer.js';
import type { Tx, Write } from './tx.js';
import { untilStored } from './until-stored.js';
import type { Clock } from '../../core/clock.js';
import type { Provider } from './provider.js';
import type { Logger } from '../../core/logger.js';

/** The longest the engine sleeps before looking at the queue again. */
const MAX_SLEEP_MS = 3_600_000;

/** What the engine reports for metrics; nothing here feeds back into execution. */
export interface EngineObserver {
  onCall(outcome: CallOutcome, model: string): void;
  /** Due work waited: every call slot was taken, or the breaker held calls back. */
  onLimiterWait(reason: 'slots_full' | 'breaker_open'): void;
  onRecovery(counts: { requeued: number; resumed: number; interrupted: number; locks_released: number; parents_closed: number }): void;
}

export interface EngineOptions {
  /** Reads outside a write (due times, the recovery scan's candidates): the last commit, never a batch in progress. */
  reader: Sql;
  /** Every write: one writer transaction (core/tx.ts), `now` from the same clock. */
  write: Write;
  /** The one engine context (owner, operations, prices, …), shared with the commands that end items. */
  ctx: EngineContext;
  provider: Provider;
  clock: Clock;
  logger: Logger;
  maxInFlight: number;
  callTimeoutMs: number;
  recoveryIntervalMs: number;
  breaker: BreakerPolicy;
  /** Fair scheduler, rate limiter, budgets and prices (see producer.ts). */
  flow: FlowControl;
  /** Credentials to scrub from everything a call returns before it is logged or recorded. */
  secrets: readonly string[];
  /** Provider-requested waits are cut to this (config `retry.max_provider_wait`). */
  maxProviderWaitMs?: number;
  /** Claiming pauses while this says no (storage pressure): no paid call whose answer cannot be recorded. */
  storage?: { readonly allowsClaims: boolean };
  observer?: EngineObserver;
}

interface InFlight {
  cancel: AbortController;
  lockScope: string;
  /** Log lines about this item carry its thread_id and work_item_id. */
  log: Logger;
}

export class Engine {
  private readonly inFlight = new Map<string, InFlight>();
  /** Lease length: a call can run to its timeout and the lease still covers it. */
  private readonly leaseMs: number;
  private stopping = false;
  private ticking = false;
  private tickAgain = false;
  private tickScheduled = false;
  private dueTimer: NodeJS.Timeout | null = null;
  /** The rate limiter refused a claim: the earliest time to try again. */
  private limitedUntil: number | null = null;
  private timers: NodeJS.Timeout[] = [];
  private idleWaiters: (() => void)[] = [];
  /** One breaker: this engine talks to one provider endpoint. */
  readonly breaker: CircuitBreaker;
  recoveryDone = false;
  /** Engine lines not about one item still carry thread_id and work_item_id (null), for uniform filtering. */
  private readonly log: Logger;

  constructor(private readonly o: EngineOptions) {
    this.log = o.logger.child({ component: 'engine', thread_id: null, work_item_id: null });
    this.leaseMs = o.callTimeoutMs + 30_000;
    this.breaker = new CircuitBreaker(o.breaker);
  }

  private get ctx(): EngineContext {
    return this.o.ctx;
  }

  get endpoint(): string {
    return this.o.provider.endpoint;
  }

  /** Per model: whether a 429 has parked it, and until when. */
  rateLimitSnapshot() {
    return this.o.flow.limiter.snapshot(this.o.clock.now());
  }

  get inFlightCount(): number {
    return this.inFlight.size;
  }

  /** Runs the start-up recovery scan, then starts claiming, heartbeats and periodic recovery. */
  async start(): Promise<void> {
    // On a full disk these wait for space (health says why) rather than fail the start.
    const stopped = () => this.stopping;
    // Budgets may have been raised since the last run: parked items get a fresh look at the first claim.
    await untilStored(() => this.write((tx) => unparkBudgetItems(tx.sql, { project_id: null, now: tx.now })), {
      log: this.log,
      what: 'the start-up writes',
      stopped,
    });
    await untilStored(() => this.recover(true, true), { log: this.log, what: 'the start-up recovery scan', stopped }).catch((err) =>
      this.log.error({ err }, 'recovery scan failed'),
    );
    this.recoveryDone = true;
    this.timers.push(setInterval(() => void this.heartbeat(), Math.max(1000, Math.floor(this.leaseMs / 3))));
    this.timers.push(setInterval(() => void this.recover(false), this.o.recoveryIntervalMs));
    for (const t of this.timers) t.unref();
    this.wake();
  }

  /** Asks the engine to look for claimable work now. Cheap and idempotent. */
  wake(): void {
    if (this.stopping) return;
    if (this.ticking) {
      this.tickAgain = true;
      return;
    }
    if (this.tickScheduled) return;
    this.tickScheduled = true;
    setImmediate(() => {
      this.tickScheduled = false;
      void this.tick();
    });
  }

  /** Claims whatever is due now and returns how many items it started (what `wake` does, awaitable). */
  async claimDue(): Promise<number> {
    while (this.ticking) await new Promise((r) => setImmediate(r));
    return this.tick();
  }

  /** Aborts the in-flight calls of these work items (a user's cancel). */
  abort(workItemIds: string[]): void {
    for (const id of workItemIds) this.inFlight.get(id)?.cancel.abort();
  }

  /**
   * Stops claiming and waits up to `drainMs` for in-flight items to finish. Items still running after
   * that are left to the next start's recovery scan (their calls may have been paid: INTERRUPTED).
   */
  async stop(drainMs: number): Promise<{ abandoned: number }> {
    this.stopping = true;
    if (this.dueTimer) clearTimeout(this.dueTimer);
    for (const t of this.timers) clearInterval(t);
    if (this.inFlight.size > 0) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, drainMs);
        this.idleWaiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    return { abandoned: this.inFlight.size };
  }

  private write<T>(fn: (tx: Tx) => T): Promise<T> {
    return this.o.write(fn);
  }

  private async tick(): Promise<number> {
    if (this.stopping || this.o.storage?.allowsClaims === false) return 0; // woken again when space returns
    this.ticking = true;
    let started = 0;
    try {
      await this.write((tx) => skipItemsPastDeadline(tx, this.ctx));
      const wanted = this.o.maxInFlight - this.inFlight.size;
      // An open breaker admits nothing: items stay queued and no attempt is burned.
      const free = this.breaker.admit(wanted, this.o.clock.now());
      if (free < Math.max(1, wanted)) await this.noteLimiterWait(wanted === 0 ? 'slots_full' : 'breaker_open');
      if (free > 0) {
        const round = await this.write((tx) => claimWorkItems(tx, this.o.flow, this.ctx.owner, free, this.leaseMs));
        const claimed = round.claimed;
        if (claimed.length === 0) this.breaker.onInconclusive();
        if (claimed.length > 0) this.ctx.crashAt('after_claim');
        for (const item of claimed) this.launch(item, null);
        started = claimed.length;
        // A full batch means more may be waiting; otherwise sleep until the next item is due, or until
        // the rate limiter lets the next call through.
        if (claimed.length === free && free === wanted) this.tickAgain = true;
        if (round.limitedUntil !== null) this.limitedUntil = round.limitedUntil;
      }
      await this.scheduleNextDue();
    } catch (err) {
      this.log.error({ err }, 'claim failed; retrying in 1s');
      this.scheduleAt(this.o.clock.now() + 1000);
    } finally {
      this.ticking = false;
      if (this.tickAgain) {
        this.tickAgain = false;
        this.wake();
      }
    }
    return started;
  }

  private async noteLimiterWait(reason: 'slots_full' | 'breaker_open'): Promise<void> {
    if (!this.o.observer) return;
    const due = await nextQueuedDueAt(this.o.reader);
    if (due !== null && due <= this.o.clock.now()) this.o.observer.onLimiterWait(reason);
  }

  /** Sleeps until the next queued item is due, a deadline passes, or the breaker lets a probe through. */
  private async scheduleNextDue(): Promise<void> {
    const now = this.o.clock.now();
    const candidates = [await nextQueuedDueAt(this.o.reader), await nextQueuedDeadline(this.o.reader), this.breaker.reopensAt(), this.limitedUntil].filter(
      (t): t is number => t !== null && t > now,
    );
    if (candidates.length > 0) this.scheduleAt(Math.min(...candidates));
  }

  private scheduleAt(at: number): void {
    if (this.stopping) return;
    if (this.dueTimer) clearTimeout(this.dueTimer);
    // Capped: a parked item's far-future not_before must not overflow setTimeout (it would fire at once),
    // and a long sleep re-checks now and then anyway.
    this.dueTimer = setTimeout(
      () => {
        this.dueTimer = null;
        this.wake();
      },
      Math.min(MAX_SLEEP_MS, Math.max(0, at - this.o.clock.now())),
    );
    this.dueTimer.unref();
  }

  private launch(item: { id: string; thread_id: string; lock_scope: string }, resumeFrom: LedgerRow | null): void {
    const itemId = item.id;
    const log = this.o.logger.child({ component: 'engine', thread_id: item.thread_id, work_item_id: item.id });
    const entry: InFlight = { cancel: new AbortController(), lockScope: item.lock_scope, log };
    this.inFlight.set(itemId, entry);
    this.runItem(itemId, entry.cancel.signal, resumeFrom, log)
      .catch((err) => log.error({ err }, 'work item step failed; recovery will resume it'))
      .finally(() => {
        this.inFlight.delete(itemId);
        if (this.inFlight.size === 0) for (const w of this.idleWaiters.splice(0)) w();
        this.wake();
      });
  }

  /** One item from its lease to its outcome. A recorded response is never requested again. */
  private async runItem(itemId: string, cancel: AbortSignal, resumeFrom: LedgerRow | null, log: Logger): Promise<void> {
    let response = resumeFrom;
    if (!response) {
      const started = await this.write((tx) => startWorkItem(tx, this.ctx, itemId));
      if (!started) return this.breaker.onInconclusive();
      if (started.kind === 'recorded') {
        // Answered from the ledger (a replay or a cache hit): no call, nothing paid.
        const recorded = started.response;
        await this.write((tx) => finishAnswer(tx, this.ctx, itemId, recorded, false));
        return;
      }
      const request = started.request;
      this.ctx.crashAt('during_call');
      const outcome = await executeCall(this.o.provider, request, {
        cancel,
        timeoutMs: this.o.callTimeoutMs,
        now: () => this.o.clock.now(),
        secrets: this.o.secrets,
        maxProviderWaitMs: this.o.maxProviderWaitMs,
      });
      this.observeProvider(request.model, outcome);
      this.o.observer?.onCall(outcome, request.model);
      if (outcome.kind === 'error') {
        await this.write((tx) => failLeasedAttempt(tx, this.ctx, itemId, outcome.error, outcome.latencyMs, request.model));
        return;
      }
      // Paid work: keep trying to record it through storage trouble rather than lose it.
      const record = () => this.write((tx) => recordResponse(tx, this.ctx, itemId, outcome, request.model));
      response = await untilStored(record, { log, what: 'the write of a paid response', stopped: () => this.stopping });
      this.ctx.crashAt('after_response');
    }
    const recorded = response;
    await this.write((tx) => finishAnswer(tx, this.ctx, itemId, recorded, resumeFrom !== null));
  }

  /** Lets the breaker and the rate limiter learn from a call; wakes the engine when they allow calls again. */
  private observeProvider(model: string, outcome: CallOutcome): void {
    const targets = {
      breaker: this.breaker,
      limiter: this.o.flow.limiter,
      log: this.log,
      endpoint: this.o.provider.endpoint,
      defaultWaitMs: this.ctx.operations.defaultPolicy.baseMs,
    };
    const f = learnFromOutcome(targets, model, outcome, this.o.clock.now());
    if (f.rateLimitedUntil !== null) this.limitedUntil = Math.max(this.limitedUntil ?? 0, f.rateLimitedUntil);
    for (const at of [f.breakerReopensAt, f.rateLimitedUntil]) if (at !== null) this.scheduleAt(at);
  }

  /** When a model's 429 hold ends (null: not held), for `combine thread` and health; default: the configured model. */
  rateLimitHeldUntil(model = this.ctx.operations.defaultParams.model): number | null {
    return this.o.flow.limiter.parkedUntil(model, this.o.clock.now());
  }

  /** `combine retry` of a held item: the user lifts the model's 429 hold now. */
  releaseRateLimitHold(model = this.ctx.operations.defaultParams.model): void {
    this.o.flow.limiter.unpark(model);
    this.limitedUntil = null;
    this.wake();
  }

  /** Extends the leases (and epic locks) of every in-flight item in one write. */
  private async heartbeat(): Promise<void> {
    if (this.inFlight.size === 0) return;
    const items = [...this.inFlight.entries()].map(([id, f]) => ({ id, lockScope: f.lockScope }));
    try {
      const lost = await this.write((tx) => extendLeases(tx, this.ctx.owner, items, tx.now + this.leaseMs));
      for (const id of lost) (this.inFlight.get(id)?.log ?? this.log).warn('lease lost while the item was in flight');
    } catch (err) {
      this.log.error({ err }, 'lease heartbeat failed');
    }
  }

  /**
   * The recovery scan. At start every lease held by another owner is stale: one daemon serves a home,
   * so that owner is a previous, dead process. Later scans take only expired leases not in flight here.
   */
  async recover(startup: boolean, throwOnFailure = false): Promise<void> {
    try {
      const now = this.o.clock.now();
      const stale = startup
        ? await listLeasesNotOwnedBy(this.o.reader, this.ctx.owner)
        : (await listExpiredLeases(this.o.reader, now)).filter((i) => !this.inFlight.has(i.id));
      const result = await this.write(async (tx) => ({
        ...(await rescueLeases(tx, this.ctx, stale, this.leaseMs)),
        ...(await sweepLocksAndParents(tx)),
      }));
      for (const r of result.resume) {
        const item = await getWorkItem(this.o.reader, r.itemId);
        if (item) this.launch(item, r.response);
      }
      const { resume, ...counts } = result;
      this.o.observer?.onRecovery({
        requeued: counts.requeued,
        resumed: resume.length,
        interrupted: counts.interrupted,
        locks_released: counts.locksReleased.length,
        parents_closed: counts.parentsClosed,
      });
      if (stale.length > 0 || counts.locksReleased.length > 0 || counts.parentsClosed > 0) {
        this.log.info({ ...counts, resumed: resume.length, startup }, 'recovery scan');
      }
      this.wake();
    } catch (err) {
      if (throwOnFailure) throw err;
      this.log.error({ err }, 'recovery scan failed');
    }
  }
}
