/**
 * One leased work item from its lease to its outcome: prompt recorded (startWorkItems) → the call on its
 * route's endpoint (executor) → the response recorded at once (paid work) → validated and applied, or
 * repaired, escalated, retried, dead-lettered (finishAnswer). A recorded response is never requested
 * again: recovery resumes from it (`resumeFrom`).
 */
import type { ItemWithThread, ReadAhead } from '../../db/item-with-thread.js';
import type { LedgerRow } from '../../db/schema.js';
import { refusedValueOf } from '../../db/errors.js';
import { InfraError } from '../../core/errors.js';
import type { Clock } from '../../core/clock.js';
import type { Logger } from '../../core/logger.js';
import type { ModelRoute, ModelRouter } from '../routing/router.js';
import type { CallSpan, EngineSpans } from '../tracing/engine-spans.js';
import { finishAnswer, recordResponse } from './completer.js';
import { failLeasedAttempt, failRefusedWrite, type RefusedStep } from './failures.js';
import { ItemReads, type AnswerResult, type EngineContext } from './leased.js';
import { endThreadsLater, endThreadsTogether } from './ends-together.js';
import { executeCall, type CallOutcome, type ItemAbort } from './executor.js';
import type { SentPrompt } from './response-cache.js';
import type { BuiltRequest } from './request.js';
import { eachStep, itemWrite, type Steps } from './shared-writes.js';
import { startWorkItems, type StartResult } from './starts.js';
import type { StartSlots } from './start-slots.js';
import type { Tx, Write } from './tx.js';
import type { PendingEntry } from './ledger-append.js';
import { untilStored } from './until-stored.js';
import { giveBackAdmission, giveBackShared, type Admitted } from './claim-admissions.js';

export interface PipelineDeps {
  ctx: EngineContext;
  router: ModelRouter;
  clock: Clock;
  spans: EngineSpans;
  write<T>(fn: (tx: Tx) => T): Promise<T>;
  call: { timeoutMs: number; secrets: readonly string[]; maxProviderWaitMs: number | undefined };
  stopped(): boolean;
  /** How many items may be between their claim and their call at once (a large claim round starts in slices). */
  startSlots: StartSlots;
  /** The item's start, response and answer writes, each committed; several items' may share a closure (shared-writes.ts). */
  writes: ItemWrites;
  /** How many answers may be between their arrival and their outcome at once (`inAnswerSlot`). */
  answerSlots: StartSlots;
  /** A call's outcome, for the route's breaker and rate limiter and for metrics. */
  onOutcome(route: ModelRoute, outcome: CallOutcome): void;
}

export interface LeasedItem {
  item: { id: string; thread_id: string };
  /** The item's abort: the user's cancel aborts it, and its call's deadline (executor.ts). */
  cancel: ItemAbort;
  /** The recorded answer recovery resumes from (no call), or null. */
  resumeFrom: LedgerRow | null;
  /** The item's logger (made on first use: most items never log). */
  log: () => Logger;
  /**
   * What the claim's admission took (its route's limiter share, a half-open probe and, sharing the database,
   * the shared buckets' share), until the start: given back when no call follows (`giveBackUnusedAdmission`).
   */
  claimAdmission: Admitted | null;
  traceparent: string | null;
  /** The request the claim built (and reserved for), until the start takes it; null: built at the start. */
  claimedRequest: BuiltRequest | null;
}

type PaidAnswer = Extract<CallOutcome, { kind: 'response' }>;

/** The writes of a leased item's steps (completer.ts), each committed when its promise settles. */
export interface ItemWrites {
  start(a: { itemId: string; claimed: BuiltRequest | null }): Promise<StartResult | null>;
  record(a: { itemId: string; outcome: PaidAnswer }): Promise<PendingEntry>;
  finish(a: { itemId: string; response: LedgerRow; resumed: boolean; sent: SentPrompt | undefined }): Promise<AnswerResult>;
}

/** The item writes of the engine's context; the items whose start, record or answer comes together share a closure (shared-writes.ts). */
export function itemWrites(write: Write, ctx: EngineContext, dialect: 'sqlite' | 'postgres'): ItemWrites {
  return {
    // One start for the closure's items: their threads move in one statement, in the lock order (starts.ts).
    start: leasedItemWrite(write, dialect, 'start', (tx, asks, reads) => startWorkItems(tx, ctx, asks, reads), 'budgets'),
    record: leasedItemWrite(
      write,
      dialect,
      'record',
      eachItem((tx, a, known) => recordResponse(tx, ctx, a.itemId, a.outcome, known)),
      'budgets',
    ),
    // An answer's apply locks its target document's head: a closure of answers takes all their heads
    // first, in id order (not each in its answers' order, which another daemon's closure crossed). One
    // closure for every project's answers: a closure per project, each in flight, gathered one or two
    // answers each and saved few transactions (bench/README.md, 2026-11-25 09:00–09:53 UTC).
    finish: leasedItemWrite(
      write,
      dialect,
      'rows',
      endingTogether(
        dialect,
        eachItem((tx, a, known) => finishAnswer(tx, ctx, a.itemId, a.response, a.resumed, a.sent, known)),
      ),
      'documents',
    ),
  };
}

/**
 * Postgres: the steps of a closure of several answers end their items' threads together after the last
 * one, in one round trip (ends-together.ts), not one each while the closure holds its documents' heads.
 * A step alone, and SQLite (one writer: no lock held across round trips), end theirs as they go.
 */
function endingTogether<A, R>(dialect: 'sqlite' | 'postgres', steps: Steps<A, R, ItemReads>): Steps<A, R, ItemReads> {
  if (dialect !== 'postgres') return steps;
  return async (tx, args, reads) => {
    if (args.length < 2) return steps(tx, args, reads);
    endThreadsLater(tx);
    const results = await steps(tx, args, reads);
    await endThreadsTogether(tx);
    return results;
  };
}

/** Steps run one item at a time, each given its item's read (`known`) when a shared closure read it ahead. */
function eachItem<A extends { itemId: string }, R>(step: (tx: Tx, arg: A, known: ItemWithThread | undefined) => Promise<R>): Steps<A, R, ItemReads> {
  return eachStep((tx, a, reads) => step(tx, a, reads?.take(a.itemId)));
}

/**
 * `itemWrite` of a leased item's step: a shared closure's items are read with their threads, and what
 * the step also needs (`ahead`), in one statement before its steps run (leased.ts `ItemReads`), and each
 * step is given its item's read (`known`) instead of reading it; a step that runs alone reads its own.
 * On Postgres too: the step's rows besides its item's (its thread, an orchestration it starts, its
 * charge, a budget lock or a document's head) are taken in one order across a closure — `ItemReads`
 * takes first what the steps share (`shared`: the budget locks, or the document heads), and the steps
 * run by thread (`threadKey`).
 */
function leasedItemWrite<A extends { itemId: string }, R>(
  write: Write,
  dialect: 'sqlite' | 'postgres',
  ahead: ReadAhead,
  steps: Steps<A, R, ItemReads>,
  shared: 'budgets' | 'documents',
): (arg: A) => Promise<R> {
  const readAhead = (tx: Tx, args: readonly A[]): Promise<ItemReads> =>
    ItemReads.read(
      tx,
      args.map((a) => a.itemId),
      ahead,
      shared,
    );
  const postgres = { orderBy: (reads: ItemReads, a: A) => reads.threadKey(a.itemId) };
  return itemWrite<A, R, ItemReads>(write, dialect, steps, readAhead, postgres);
}

export async function runLeasedItem(d: PipelineDeps, l: LeasedItem): Promise<void> {
  const itemId = l.item.id;
  const resumeFrom = l.resumeFrom;
  if (resumeFrom) return inAnswerSlot(d, () => finish(d, l, resumeFrom, true));
  const start = await startCall(d, l);
  if (!start) return;
  if (start.kind === 'recorded') {
    // Answered from the ledger (a replay or a cache hit): no call, nothing paid.
    const recorded = start.response.row;
    return inAnswerSlot(d, () => finish(d, l, recorded, false));
  }
  const { route, span, sent } = start;
  const outcome = await start.outcome;
  span.end(d.clock.now(), outcome.kind === 'error' ? outcome.error.code : undefined);
  d.onOutcome(route, outcome);
  if (outcome.kind === 'error') {
    await d.write((tx) => failLeasedAttempt(tx, d.ctx, itemId, outcome.error, outcome.latencyMs));
    return;
  }
  return inAnswerSlot(d, async () => {
    // Paid work: keep trying to record it through storage trouble rather than lose it. A value storage
    // refuses is no trouble that passes: the item ends then, its call closed spent (endRefused).
    const record = () => d.writes.record({ itemId, outcome });
    const recorded = await untilStored(record, { log: l.log, what: 'the write of a paid response', stopped: d.stopped }).catch(async (err: unknown) => {
      await endRefused(d, l, err, { kind: 'record', latencyMs: outcome.latencyMs });
      return null;
    });
    if (recorded === null) return;
    const response = recorded.row;
    d.ctx.crashAt('after_response');
    await finish(d, l, response, false, sent);
  });
}

/**
 * An answer's recording and application, in one of the answer slots: at most `answerSlots.size` answers
 * are between their arrival and their outcome at once. The rest wait, each holding only its answer, before
 * anything is made from it. When 2,000 answers arrive together, the writer then gets them in batches of
 * the slots' size. Without the slots, one transaction took 1,024 writes. All their parses, ledger entries
 * and events stayed alive until its commit, which moved them to the old generation, and the event loop
 * was blocked for seconds.
 * Pay-once is unchanged: a waiting answer is not recorded yet, as it was not while it waited for the
 * writer, and recovery resumes an item whose call was sent and whose answer is not recorded.
 */
async function inAnswerSlot(d: PipelineDeps, step: () => Promise<void>): Promise<void> {
  await d.answerSlots.take();
  try {
    await step();
  } finally {
    d.answerSlots.giveBack();
  }
}

type Started =
  | { kind: 'recorded'; response: PendingEntry }
  | { kind: 'call'; route: ModelRoute; span: CallSpan; outcome: Promise<CallOutcome>; sent: SentPrompt };

/**
 * The item's start, in one of the start slots (start-slots.ts): the `prompt` entry and `running`
 * committed, then the call sent — its outcome is awaited outside the slot. Null: the item ended instead.
 * A start that makes no call gives its claim's admission back after the slot is free again
 * (`giveBackUnusedAdmission`): the shared buckets' write is not the start's, and holds no start slot.
 */
async function startCall(d: PipelineDeps, l: LeasedItem): Promise<Started | null> {
  const admission = l.claimAdmission;
  l.claimAdmission = null;
  let started: Started | null;
  try {
    started = await startInSlot(d, l);
  } catch (err) {
    // Failed on storage: the shared write would wait out the same trouble's retries before the item's
    // recovery; the shared share refills instead (best-effort, as the buckets are).
    if (admission) await giveBackUnusedAdmission(d, l, admission, { shared: !(err instanceof InfraError) });
    throw err;
  }
  // No call after all (the start ended the item, or found its answer recorded): what its admission took is free again.
  if (started?.kind !== 'call' && admission) await giveBackUnusedAdmission(d, l, admission, { shared: true });
  return started;
}

/** `startCall`'s part in a start slot: the start's write and, when it starts the call, the call sent. */
async function startInSlot(d: PipelineDeps, l: LeasedItem): Promise<Started | null> {
  // Crash tests die here: earlier slices' calls sent, this one's items claimed but not started.
  if (await d.startSlots.take()) d.ctx.crashAt('between_start_slices');
  try {
    const claimed = l.claimedRequest;
    // Not kept by the item while its call waits (the prompt entry and the call have their own).
    l.claimedRequest = null;
    const started = await d.writes.start({ itemId: l.item.id, claimed });
    if (!started || started.kind === 'recorded') return started;
    const { request, route } = started;
    // The prompt as recorded (committed with the start): the answer is indexed under it without reading it back.
    const sent: SentPrompt = { seq: started.prompt.row.seq, requestHash: started.requestHash };
    d.ctx.crashAt('during_call');
    const span = d.spans.call(l.traceparent, l.item, route, d.clock.now());
    const outcome = executeCall(d.router.provider(route), request, {
      cancel: l.cancel,
      timeoutMs: d.call.timeoutMs,
      now: () => d.clock.now(),
      secrets: d.call.secrets,
      maxProviderWaitMs: d.call.maxProviderWaitMs,
      headers: { traceparent: span.header },
    });
    return { kind: 'call', route, span, outcome, sent };
  } finally {
    d.startSlots.giveBack();
  }
}

/**
 * The claim's admission is followed by no call (its start ended the item, found its answer recorded, or
 * failed): what it took is free again — this daemon's limiter share and probe at once and, sharing the
 * database with a bucket configured and `o.shared`, the shared buckets' share in a write of its own after
 * the start's (claim-admissions.ts `giveBackShared`), before the item ends and wakes the engine for its
 * next round. Best-effort like the buckets: a failed or skipped write's share comes back as the bucket refills.
 */
async function giveBackUnusedAdmission(d: PipelineDeps, l: LeasedItem, admission: Admitted, o: { shared: boolean }): Promise<void> {
  giveBackAdmission(admission, d.clock.now());
  if (!admission.shared || !o.shared) return;
  await d
    .write((tx) => giveBackShared(tx, admission))
    .catch((err: unknown) => l.log().warn({ err }, 'could not give the shared rate limit back the share of a claim whose start made no call; it refills'));
}

/** Validation and the mutation (or a repair, escalation, retry, dead_letter) of a recorded answer. */
async function finish(d: PipelineDeps, l: LeasedItem, response: LedgerRow, resumed: boolean, sent?: SentPrompt): Promise<void> {
  const startedAt = d.clock.now();
  const outcome = await d.writes.finish({ itemId: l.item.id, response, resumed, sent }).catch((err: unknown) => endRefused(d, l, err, { kind: 'finish' }));
  d.spans.applied(l.traceparent, l.item, startedAt, d.clock.now(), outcome);
}

/**
 * An item step's write that failed: when storage refused a value it holds (a write that would fail the
 * same way each time), the item ends in a write of its own (`failRefusedWrite`), whose outcome is
 * returned; any other failure is thrown on (recovery resumes the item). The ending write goes through
 * `untilStored` as the record write it replaces does: storage trouble then must not leave a paid item
 * whose answer is not recorded `running`, which recovery would send again (paid twice).
 */
async function endRefused(d: PipelineDeps, l: LeasedItem, err: unknown, step: RefusedStep): Promise<AnswerResult> {
  const refused = refusedValueOf(err);
  if (refused === null) throw err;
  // Loud: a refusal is that item's end after its call was paid, and a regression in one of our statements
  // would show as items ending this way. The server's own error (its detail, table, column) is the cause.
  const server = refused.cause as { detail?: string; table?: string; column?: string; constraint?: string } | undefined;
  l.log().error(
    {
      err: refused,
      sqlstate: refused.sqlstate,
      step: step.kind,
      table: server?.table,
      column: server?.column,
      constraint: server?.constraint,
      detail: server?.detail,
    },
    `storage refused a value of the item's ${step.kind} write; the item ends VALUE_REFUSED`,
  );
  const end = () => d.write((tx) => failRefusedWrite(tx, d.ctx, l.item.id, refused, step));
  return await untilStored(end, { log: l.log, what: 'the end of an item whose write storage refused', stopped: d.stopped });
}
