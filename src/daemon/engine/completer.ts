/**
 * The completer: each function applies one step's outcome in one transaction (it runs inside a writer
 * closure). Together they are the only code that moves a leased work item forward:
 *
 *   startWorkItems  claimed → running, with the `prompt` entry (committed before any call is made; starts.ts)
 *   recordResponse  the `response` entry and telemetry, committed the moment the call returns
 *   finishAnswer    `parse_report`, then the mutation (→ applied) or a repair / dead_letter
 *   failAttempt     an `error` entry, then retry with backoff, dead_letter, or canceled  (failures.ts)
 *   holdInDoubt     at-most-once: an `error` entry, the item `failed`, nothing sent again (failures.ts)
 *
 * Every status change is guarded by status and lease owner, so a worker that lost its lease fails
 * loudly (StaleStateError) instead of completing an item twice.
 */
import type { ItemWithThread } from '../../db/item-with-thread.js';
import { getLastLedgerEntryForWorkItem } from '../../ledger/store.js';
import type { LedgerRow, ThreadRow, WorkItemRow } from '../../db/schema.js';
import { markWorkItemApplied, requeueWorkItem } from '../../db/work-item-moves.js';
import { parseCompletionEnvelope, readCompletionBody } from '../../domain/completion.js';
import type { CallOutcome } from './executor.js';
import { settleFromResponse } from './charges.js';
import { deadLetter, failAttempt } from './failures.js';
import { leasedItemAndThread, releaseItemLock, releaseItemLockEndingThread, type AnswerResult, type EngineContext } from './leased.js';
import { applyThreadAnswer, checkThreadAnswer } from './operation-steps.js';
import { type RecordedCopy, rememberValidAnswer, type SentPrompt } from './response-cache.js';
import { emitWorkItem, type Tx } from './tx.js';
import { appendEntry, type PendingEntry, responsePayloadOf } from './ledger-append.js';

/**
 * Records a 2xx answer (paid work): the `response` entry, and the charge settled from it with the call's
 * telemetry. Returns the `response` entry (its row once committed).
 */
export async function recordResponse(
  tx: Tx,
  ctx: EngineContext,
  itemId: string,
  outcome: Extract<CallOutcome, { kind: 'response' }>,
  known?: ItemWithThread,
): Promise<PendingEntry> {
  // No budget lock here: `settleFromResponse` takes it as this transaction's first lock (appendEntry only
  // buffers: the append, which locks the chain head, runs at the end), so taking it here too was a second
  // round trip on Postgres for a lock already held.
  const { item, thread, openCharge, lastEntryType } = await leasedItemAndThread(tx, ctx, itemId, 'running', known, 'record');
  // Already recorded: a write whose COMMIT's outcome was unknown (the connection failed during it) is run
  // again by its caller, and it did commit. The answer is returned as stored, not appended twice.
  if (lastEntryType === 'response') {
    const recorded = await getLastLedgerEntryForWorkItem(tx.sql, item.id);
    if (recorded) return { row: recorded };
  }
  const envelope = parseCompletionEnvelope(outcome.bodyText);
  const usage = envelope.ok ? envelope.usage : null;
  const entry = appendEntry(tx, thread, item.id, 'response', item.attempt, {
    http_status: outcome.httpStatus,
    request_id: outcome.requestId,
    latency_ms: outcome.latencyMs,
    usage,
    rate_limit: outcome.rateLimit,
    // The body as received; kept as text only when it is not JSON.
    body: envelope.body,
    ...(envelope.body === null ? { body_text: outcome.bodyText } : {}),
  });
  await settleFromResponse(tx, item, usage, outcome, ctx.priceOf, openCharge);
  return entry;
}

/**
 * Validates a recorded response and acts on it in this one transaction: parse_report, then either the
 * mutation (document version, mutation row, mutation_report, item applied, thread complete, lock
 * released) or a repair request / dead_letter. `resumed` marks a response recovered after a restart;
 * `sent`, the prompt this pipeline recorded and sent for it (absent when resumed or answered from the ledger).
 */
export async function finishAnswer(
  tx: Tx,
  ctx: EngineContext,
  itemId: string,
  response: LedgerRow,
  resumed: boolean,
  sent?: SentPrompt,
  known?: ItemWithThread,
): Promise<AnswerResult> {
  const { item, thread } = await leasedItemAndThread(tx, ctx, itemId, 'running', known);
  if (thread.status === 'canceled') {
    return await failAttempt(tx, ctx, item, { code: 'CANCELED', class: 'canceled', message: 'canceled; the answer was recorded but not applied' });
  }
  const recorded = responsePayloadOf(response) as RecordedCopy & { body: unknown };
  const provenance = {
    response_seq: response.seq,
    ...(resumed ? { resumed: true } : {}),
    ...(recorded.replay_of !== undefined ? { replay_of: recorded.replay_of } : {}),
    ...(recorded.cached_from !== undefined ? { cached_from: recorded.cached_from } : {}),
  };
  const envelope = readCompletionBody(recorded.body);
  if (!envelope.ok) {
    appendEntry(tx, thread, item.id, 'parse_report', item.attempt, { ok: false, stage: 'envelope', errors: [envelope.error], ...provenance });
    return await failAttempt(tx, ctx, item, { code: 'PROVIDER_ERROR', class: 'transient', message: envelope.error });
  }
  const verdict = checkThreadAnswer(ctx.operations, thread, envelope.content);
  if (verdict.kind === 'failed') return await deadLetter(tx, item, thread, verdict.error);
  if (verdict.kind === 'invalid') {
    appendEntry(tx, thread, item.id, 'parse_report', item.attempt, { ok: false, stage: 'schema', errors: verdict.errors, ...provenance });
    return await rejectAnswer(tx, ctx, item, thread, verdict.errors);
  }
  appendEntry(tx, thread, item.id, 'parse_report', item.attempt, { ok: true, items: verdict.items, item_noun: verdict.noun, errors: [], ...provenance });
  await rememberValidAnswer(tx, item, response, recorded, sent);
  // A replayed answer is the original paid call's: the mutation names that call's response, whose
  // charge is then not wasted after all (usage's `applied`).
  const appliedResponseSeq = recorded.replay_of ?? response.seq;
  const applied = await applyThreadAnswer(tx.sql, ctx.operations, thread, item, verdict.value, appliedResponseSeq, tx.now);
  // An apply that throws is permanent: the paid response stays recorded and `replay --apply` can
  // rescue it once the operation is fixed; recovery never resumes a dead-lettered item.
  if (!applied.ok) return await deadLetter(tx, item, thread, applied.error);
  appendEntry(tx, thread, item.id, 'mutation_report', item.attempt, {
    ...applied.mutation,
    ...(recorded.replay_of !== undefined ? { replay_of: recorded.replay_of } : {}),
  });
  await markWorkItemApplied(tx.sql, { owner: ctx.owner, now: tx.now }, applied.row);
  emitWorkItem(tx, thread, { ...item, status: 'applied' });
  ctx.crashAt('in_mutation');
  // The scope's lock row before the thread and its orchestration are locked (engine/tx.ts LOCK ORDER 3), in
  // the end's round trip — not at the COMMIT, after them: a recovery scan could take the row over meanwhile
  // (expired) and then wait for the same orchestration (pg-shared-finishes.test.ts). In a Postgres closure
  // of answers, in the closure's one end statement after its last step (ends-together.ts): later than a step
  // alone, so an expired row taken over meanwhile fails that statement and the closure's steps run alone.
  await releaseItemLockEndingThread(tx, item, thread, 'complete');
  return 'applied';
}

/**
 * An answer that failed the schema. By default it dead-letters: the requirements call it permanent.
 * An operation may opt in (config `operations.<name>.on_invalid`) to `repair` more calls to the same
 * model with the errors, then to one call to a stronger model (`escalate_to`) with them. Neither
 * starts a new attempt: the pass is one attempt for retries and backoff. Each call is its own
 * prompt/response pair, and the claim reserves its cost like any call.
 */
async function rejectAnswer(tx: Tx, ctx: EngineContext, item: WorkItemRow, thread: ThreadRow, errors: string[]): Promise<AnswerResult> {
  const policy = ctx.operations.policyFor(thread.kind);
  const escalateTo = ctx.operations.get(thread.kind)?.escalateTo ?? null;
  const message = `the answer does not match the schema: ${errors.slice(0, 5).join('; ')}`;
  const escalated = item.escalated === 1;
  const next = escalated ? null : item.repair_count < policy.repairAttempts ? 'repair' : escalateTo !== null ? 'escalate' : null;
  if (next === null) return await deadLetter(tx, item, thread, { code: 'SCHEMA_INVALID', class: 'permanent', message });
  const again = next === 'repair' ? { repair_count: item.repair_count + 1, escalated: 0 } : { repair_count: item.repair_count, escalated: 1 };
  appendEntry(tx, thread, item.id, 'error', item.attempt, {
    code: 'SCHEMA_INVALID',
    class: 'permanent',
    message,
    attempt: item.attempt,
    repair: again.repair_count,
    next,
    ...(next === 'escalate' ? { escalate_to: escalateTo } : {}),
  });
  await requeueWorkItem(tx.sql, {
    id: item.id,
    from: 'running',
    owner: ctx.owner,
    attempt: item.attempt,
    ...again,
    not_before: tx.now,
    error_code: 'SCHEMA_INVALID',
    error_message: message,
  });
  await releaseItemLock(tx, item);
  emitWorkItem(tx, thread, { ...item, ...again, status: 'queued', not_before: tx.now, error_code: 'SCHEMA_INVALID' });
  return next;
}
