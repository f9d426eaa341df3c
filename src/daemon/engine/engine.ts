/**
 * The engine loop: claim (producer) → prompt → call (executor) → record → validate/apply (completer),
 * with the recovery scan (rescuer) at start and on an interval and the leases' heartbeat (both run by
 * lease-upkeep.ts), and what calls' outcomes hold back (provider-feedback.ts). It holds no state that
 * matters for correctness: everything it knows is in the database, so a killed engine resumes from there.
 *
 * Wake-ups are event-driven: a new command, a finished item or the next due time wakes it; nothing
 * polls on a fixed delay.
 */
import type { Sql } from '../../core/sql.js';
import type { LedgerRow } from '../../db/schema.js';
import { nextQueuedDeadline, nextQueuedDueAt } from '../../db/work-items.js';
import { unparkBudgetItems } from '../../db/work-item-claims.js';
import { EngineSpans } from '../tracing/engine-spans.js';
import { traceIdOf } from '../../core/trace-context.js';
import { noTracer } from '../tracing/tracer.js';
import type { Tracer } from '../tracing/types.js';
import type { EngineContext } from './leased.js';
import { cancelCall, type CallOutcome, type ItemAbort } from './executor.js';
import { itemWrites, runLeasedItem, type PipelineDeps } from './item-pipeline.js';
import { LeaseUpkeep, type LeaseHeld, type RecoveryCounts } from './lease-upkeep.js';
import { ProviderHolds } from './provider-feedback.js';
import { claimInOwnWrite } from './claim-admissions.js';
import { claimWorkItems, skipItemsPastDeadline, type ClaimedItem, type ClaimLimits, type FlowControl } from './producer.js';
import { ANSWER_SLOTS, START_SLICE, StartSlots } from './start-slots.js';
import type { Tx, Write } from './tx.js';
import { untilStored } from './until-stored.js';
import { WakeTimer } from './wake-timer.js';
import type { Clock } from '../../core/clock.js';
import type { Logger } from '../../core/logger.js';

/** How soon a claim round looks again at an item that was due but not claimed (see scheduleNextDue). */
const DUE_RECHECK_MS = 1000;

/** What the engine reports for metrics; nothing here feeds back into execution. */
export interface EngineObserver {
  onCall(outcome: CallOutcome, model: string): void;
  /** Due work waited: every call slot was taken, or the breaker held calls back. */
  onLimiterWait(reason: 'slots_full' | 'breaker_open'): void;
  onRecovery(counts: RecoveryCounts): void;
}

/**
 * Resource pressure (ADR-002 §4): which priority classes may be claimed now and how long claim rounds
 * must be apart. Items held back stay queued and keep their attempt.
 */
export interface ClaimThrottle {
  claimLimits(): ClaimLimits & { minIntervalMs: number };
}

export interface EngineOptions {
  /** Reads outside a write (due times, the recovery scan's candidates): the last commit, never a batch in progress. */
  reader: Sql;
  /** Every write: one writer transaction (core/tx.ts), `now` from the same clock. */
  write: Write;
  /** The one engine context (owner, operations, routes, prices, …), shared with the commands that end items. */
  ctx: EngineContext;
  clock: Clock;
  logger: Logger;
  maxInFlight: number;
  callTimeoutMs: number;
  /**
   * How long a claim leases an item (default: the call timeout + 30 s). Heartbeats renew it every third
   * of it, so only a dead or stalled daemon's items expire; on a shared database, that is also how long
   * another daemon waits before it takes them over.
   */
  leaseMs?: number;
  recoveryIntervalMs: number;
  /**
   * Whether this daemon is the database's only one (SQLite in its home). Then every lease of another
   * owner at start is a previous, dead process's. Otherwise (Postgres, shared) the start-up scan takes
   * only expired leases and those of earlier processes of this home (owners starting with `homePrefix`).
   */
  exclusive: boolean;
  /** The part of the owner id every process of this daemon's home shares (runtime/owner.ts). */
  homePrefix: string;
  /** Fair scheduler, rate limiter, budgets, and the model router with each endpoint's client and breaker (see producer.ts). */
  flow: FlowControl;
  /** Spans of claims, calls and applies (no export unless configured). */
  tracer?: Tracer;
  throttle?: ClaimThrottle;
  /** Credentials to scrub from everything a call returns before it is logged or recorded. */
  secrets: readonly string[];
  /** Provider-requested waits are cut to this (config `retry.max_provider_wait`). */
  maxProviderWaitMs?: number;
  /** Claiming pauses while this says no (storage pressure): no paid call whose answer cannot be recorded. */
  storage?: { readonly allowsClaims: boolean };
  observer?: EngineObserver;
}

interface InFlight extends LeaseHeld {
  /** Aborted by a user's cancel, or by its call's deadline (executor.ts): the call's one abort signal. */
  cancel: ItemAbort;
  threadId: string;
}

export class Engine {
  private readonly inFlight = new Map<string, InFlight>();
  /** Lease length: a call can run to its timeout and the lease still covers it. */
  private readonly leaseMs: number;
  private stopping = false;
  private ticking = false;
  private tickAgain = false;
  private tickScheduled = false;
  private readonly wakeTimer: WakeTimer;
  /** What calls' outcomes hold back: breakers, 429 parks, the rate limiter's refusals. */
  private readonly holds: ProviderHolds;
  /** Lease heartbeats and the recovery scan. */
  private readonly leases: LeaseUpkeep;
  private timers: NodeJS.Timeout[] = [];
  private idleWaiters: (() => void)[] = [];
  /** Whether the last look at the queue (`scheduleNextDue`) found a queued item, due or not; true until the first. */
  private workQueued = true;
  /** When the last claim round ran (resource pressure spaces rounds out). */
  private lastClaimAt = Number.NEGATIVE_INFINITY;
  private readonly spans: EngineSpans;
  /** What one item's run from lease to outcome needs (item-pipeline.ts). */
  private readonly pipeline: PipelineDeps;
  recoveryDone = false;
  /** Engine lines not about one item still carry thread_id and work_item_id (null), for uniform filtering. */
  private readonly log: Logger;

  constructor(private readonly o: EngineOptions) {
    this.wakeTimer = new WakeTimer(o.clock, () => this.wake());
    this.log = o.logger.child({ component: 'engine', thread_id: null, work_item_id: null });
    this.leaseMs = o.leaseMs ?? o.callTimeoutMs + 30_000;
    this.spans = new EngineSpans(o.tracer ?? noTracer);
    this.pipeline = {
      ctx: o.ctx,
      router: o.flow.router,
      clock: o.clock,
      spans: this.spans,
      write: (fn) => this.write(fn),
      call: { timeoutMs: o.callTimeoutMs, secrets: o.secrets, maxProviderWaitMs: o.maxProviderWaitMs },
      stopped: () => this.stopping,
      startSlots: new StartSlots(START_SLICE),
      writes: itemWrites(o.write, o.ctx, o.reader.dialect),
      answerSlots: new StartSlots(ANSWER_SLOTS),
      onOutcome: (route, outcome) => {
        this.holds.observe(route, outcome);
        o.observer?.onCall(outcome, route.key);
      },
    };
    this.holds = new ProviderHolds({
      flow: o.flow,
      clock: o.clock,
      log: this.log,
      defaultWaitMs: () => o.ctx.operations.defaultPolicy.baseMs,
      write: o.write,
      scheduleAt: (at) => this.wakeTimer.at(at),
      wake: () => this.wake(),
    });
    this.leases = new LeaseUpkeep({
      reader: o.reader,
      write: o.write,
      ctx: o.ctx,
      exclusive: o.exclusive,
      homePrefix: o.homePrefix,
      leaseMs: this.leaseMs,
      inFlight: this.inFlight,
      resume: (item, response, traceparent) => this.launch(item, response, null, traceparent),
      wake: () => this.wake(),
      stopped: () => this.stopping,
      onRecovery: o.observer && ((counts) => o.observer!.onRecovery(counts)),
      log: this.log,
    });
  }

  private get ctx(): EngineContext {
    return this.o.ctx;
  }

  /** Per model: whether a 429 has parked it, and until when. */
  rateLimitSnapshot() {
    return this.holds.snapshot();
  }

  /** When the latest 429 hold of these routes ends (null: none held), for `combine thread`. */
  rateLimitHeldUntil(keys: readonly string[]): number | null {
    return this.holds.heldUntil(keys);
  }

  /** `combine retry` of a held item: the user lifts the 429 hold of its routes now. */
  releaseRateLimitHold(keys: readonly string[]): void {
    this.holds.release(keys);
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
      log: () => this.log,
      what: 'the start-up writes',
      stopped,
    });
    await untilStored(() => this.recover(true, true), { log: () => this.log, what: 'the start-up recovery scan', stopped }).catch((err) =>
      this.log.error({ err }, 'recovery scan failed'),
    );
    this.recoveryDone = true;
    this.timers.push(setInterval(() => void this.leases.heartbeat(), Math.max(1000, Math.floor(this.leaseMs / 3))));
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

  /**
   * `wake` for another daemon's write that freed what queued work may wait for (a slot, a lock scope, a
   * budget reservation) and queued nothing: it looks again only if its last look found queued work and
   * it has a free slot. With no queued work, nothing can have become claimable: work queued since comes
   * with a `wake` of its own, and a look already under way or due when it arrived runs anyway. With every
   * slot taken, a look could claim nothing (it would only pass a transaction ending items past their
   * deadline, which its due timer wakes it for: `scheduleNextDue`); its next free slot wakes it (`launch`).
   */
  wakeIfWorkQueued(): void {
    if (this.workQueued && this.inFlight.size < this.o.maxInFlight) this.wake();
  }

  /**
   * Whether its claim rounds take bulk and scheduled work now: not stopping, claims not paused by storage,
   * bulk not paused by pressure. On a shared database only such a daemon owns projects
   * (runtime/daemon-registry.ts): the others serve a paused or stopping daemon's projects at once.
   */
  claimsBulk(): boolean {
    return !this.stopping && this.o.storage?.allowsClaims !== false && this.o.throttle?.claimLimits().maxPriority === undefined;
  }

  /** Claims whatever is due now and returns how many items it started (what `wake` does, awaitable). */
  async claimDue(): Promise<number> {
    while (this.ticking) await new Promise((r) => setImmediate(r));
    return this.tick();
  }

  /** Aborts the in-flight calls of these work items (a user's cancel). */
  abort(workItemIds: string[]): void {
    for (const f of workItemIds.map((id) => this.inFlight.get(id))) if (f) cancelCall(f.cancel);
  }

  /** Aborts the in-flight calls of these threads: another daemon on the shared database canceled them. */
  abortThreads(threadIds: ReadonlySet<string>): void {
    for (const f of this.inFlight.values()) if (threadIds.has(f.threadId)) cancelCall(f.cancel);
  }

  /**
   * Stops claiming and waits up to `drainMs` for in-flight items to finish. Items still running after
   * that are left to the next start's recovery scan (their calls may have been paid: INTERRUPTED).
   */
  async stop(drainMs: number): Promise<{ abandoned: number }> {
    this.stopping = true;
    this.wakeTimer.stop();
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
    const { minIntervalMs, ...limits } = this.o.throttle?.claimLimits() ?? { minIntervalMs: 0 };
    const now = this.o.clock.now();
    if (now < this.lastClaimAt + minIntervalMs) {
      // A busy machine: claim rounds are spaced out (woken again when the pressure ends).
      this.wakeTimer.at(this.lastClaimAt + minIntervalMs);
      return 0;
    }
    this.ticking = true;
    let started = 0;
    try {
      const wanted = this.o.maxInFlight - this.inFlight.size;
      if (wanted === 0) {
        await this.write((tx) => skipItemsPastDeadline(tx, this.ctx));
        await this.noteLimiterWait('slots_full');
      } else {
        this.lastClaimAt = this.o.clock.now();
        // One transaction per round: the items past their deadline end first, then the claim, which
        // passes over them anyway. An endpoint whose breaker is open admits nothing: its items stay
        // queued and no attempt is burned.
        // What a run of the round that did not commit took from the limiter and the breakers is given back.
        const round = await claimInOwnWrite(this.o.write, this.o.clock, async (tx, admissions) => {
          await skipItemsPastDeadline(tx, this.ctx);
          return claimWorkItems(tx, this.o.flow, this.ctx.owner, wanted, this.leaseMs, admissions, limits);
        });
        const claimed = round.claimed;
        if (round.breakerHeld) await this.noteLimiterWait('breaker_open');
        if (claimed.length > 0) this.ctx.crashAt('after_claim');
        this.spans.claimed(claimed, this.lastClaimAt, this.o.clock.now());
        for (const c of claimed) this.launch(c.item, null, c);
        started = claimed.length;
        // A full batch means more may be waiting; otherwise sleep until the next item is due, or until
        // a rate limiter or a breaker lets the next call through.
        if (claimed.length === wanted) this.tickAgain = true;
        if (round.limitedUntil !== null) this.holds.limitedUntil = round.limitedUntil;
      }
      // A round that follows at once (a full batch, or woken meanwhile) looks at the due times itself.
      if (!this.tickAgain) await this.scheduleNextDue();
    } catch (err) {
      this.log.error({ err }, 'claim failed; retrying in 1s');
      this.wakeTimer.at(this.o.clock.now() + 1000);
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
    const due = await nextQueuedDueAt(this.o.reader);
    this.workQueued = due !== null;
    const candidates = [due, await nextQueuedDeadline(this.o.reader), this.o.flow.router.nextBreakerReopen(), this.holds.limitedUntil].filter(
      (t): t is number => t !== null && t > now,
    );
    // An item already due that this round did not claim, with slots free: usually held by a lock or a
    // breaker (whose release wakes the engine), but it may also have been requeued by a commit on another
    // connection after this round's snapshot, whose wake-up came before the round began. Look again soon
    // rather than wait for an event that may not come.
    if (due !== null && due <= now && this.inFlight.size < this.o.maxInFlight) candidates.push(now + DUE_RECHECK_MS);
    if (candidates.length > 0) this.wakeTimer.at(Math.min(...candidates));
  }

  /** Runs one leased item: `claim` is how it was claimed (its route), or null when recovery resumes a recorded answer. */
  private launch(
    item: { id: string; thread_id: string; lock_scope: string },
    resumeFrom: LedgerRow | null,
    claim: ClaimedItem | null,
    traceparent = claim?.traceparent ?? null,
  ): void {
    const itemId = item.id;
    // Its ids alone, not the row: kept by the item's closures while its call waits (2,000 rows at target 6).
    const ids = { id: itemId, thread_id: item.thread_id };
    // The item's child logger is made on first use: most items never log, and making one runs the
    // daemon's redaction over each binding (~11 KiB allocated per item at target 1).
    const logger = this.o.logger;
    let child: Logger | null = null;
    const log = () => (child ??= logger.child({ component: 'engine', thread_id: ids.thread_id, work_item_id: ids.id, trace_id: traceIdOf(traceparent) }));
    const entry: InFlight = { cancel: { controller: new AbortController(), canceledByUser: false }, threadId: item.thread_id, lockScope: item.lock_scope, log };
    this.inFlight.set(itemId, entry);
    runLeasedItem(this.pipeline, {
      item: ids,
      cancel: entry.cancel,
      resumeFrom,
      log,
      claimAdmission: claim?.admission ?? null,
      traceparent,
      claimedRequest: claim?.request ?? null,
    })
      .catch((err) => log().error({ err }, 'work item step failed; recovery will resume it'))
      .finally(() => {
        this.inFlight.delete(itemId);
        if (this.inFlight.size === 0) for (const w of this.idleWaiters.splice(0)) w();
        this.wake();
      });
  }

  /** The recovery scan (lease-upkeep.ts); `throwOnFailure`: a failed scan throws instead of being logged. */
  recover(startup: boolean, throwOnFailure = false): Promise<void> {
    return this.leases.recover(startup, throwOnFailure);
  }
}
