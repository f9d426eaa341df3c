/**
 * `combine replay`: runs today's answer check and mutation planning (the operation's `apply`) over a
 * thread's recorded answer — no provider call — and reports what it would change. With `--apply` the
 * answer goes through the normal path: the failed thread reopens with a new work item whose first
 * ledger entry is a copy of the recorded response marked `replay_of`; the engine claims it under the
 * operation's lock, sees the answer is already recorded and validates and applies it without a call
 * (engine/starts.ts `startWorkItems`).
 */
import type { Sql } from '../core/sql.js';
import { listLedgerForThread } from './store.js';
import { getDocumentHead } from '../db/projects.js';
import type { LedgerRow, ThreadRow, WorkItemRow } from '../db/schema.js';
import { findActiveThreadByKey, getThread, listChildThreads } from '../db/threads.js';
import { readCompletionBody } from '../domain/completion.js';
import type { OperationRegistry } from '../operations/registry.js';
import { itemNoun, planMutation } from '../operations/runtime.js';
import { reopenFailedParent, retryChild } from '../daemon/services/commands.js';
import { checkThreadAnswer } from '../daemon/engine/operation-steps.js';
import type { Tx } from '../daemon/engine/tx.js';
import { appendEntry } from '../daemon/engine/ledger-append.js';
import { documentsOf, threadInput, threadTarget } from '../daemon/engine/operation-context.js';
import { runWithReads } from '../daemon/engine/read-ahead.js';
import { OperationCallError, CommandError } from '../core/errors.js';

export interface ReplayReport {
  thread_id: string;
  thread_status: string;
  /** The recorded response that was replayed. */
  response_seq: number;
  response_work_item_id: string | null;
  /** What happened to that answer when it was recorded. */
  recorded: { parse_ok: boolean | null; errors: string[]; applied: boolean };
  /**
   * What today's check and `apply` make of it: `items` as the parse report counts them, also under the
   * operation's item name (e.g. `stories`). `stage` says where it was rejected.
   */
  replayed: { ok: boolean; stage: 'envelope' | 'schema' | 'apply' | null; errors: string[]; items: number; [noun: string]: unknown };
  /** The mutation today's code would make: the document, its version now, and the operation's summary of the change. */
  plan: ({ doc_type: string; key: string | null; document_version: number } & Record<string, unknown>) | null;
  /** Set with --apply: the work item that will apply the answer (no provider call). */
  applied: { work_item_id: string; sequence: number; status: string } | null;
}

async function replayableThread(sql: Sql, threadId: string): Promise<ThreadRow> {
  const thread = await getThread(sql, threadId);
  if (!thread) throw new CommandError('NOT_FOUND', `no thread "${threadId}"`);
  if (thread.role === 'orchestration') {
    const failed = (await listChildThreads(sql, thread.id)).filter((c) => c.status === 'failed').map((c) => c.id);
    const hint = failed.length > 0 ? `; its failed children: ${failed.join(', ')}` : '';
    throw new CommandError('BAD_REQUEST', `thread ${threadId} is a ${thread.kind} orchestration: replay one of its children at a time${hint}`);
  }
  return thread;
}

/** The thread's recorded response to replay: the given seq, else its newest one. */
function pickResponse(entries: LedgerRow[], threadId: string, seq: number | null): LedgerRow {
  const responses = entries.filter((e) => e.entry_type === 'response');
  const chosen = seq === null ? responses.at(-1) : responses.find((e) => e.seq === seq);
  if (!chosen) {
    throw new CommandError(
      'NOT_FOUND',
      seq === null ? `thread ${threadId} has no recorded response to replay` : `entry ${seq} is not a response of thread ${threadId}`,
    );
  }
  return chosen;
}

/** Builds the report without writing anything. */
export async function planReplay(sql: Sql, ops: OperationRegistry, threadId: string, seq: number | null): Promise<ReplayReport> {
  const thread = await replayableThread(sql, threadId);
  const op = ops.get(thread.kind);
  if (!op) throw new CommandError('CONFLICT', `thread ${threadId} is a ${thread.kind}, and no loaded operation has that name`);
  const entries = await listLedgerForThread(sql, thread.id);
  const response = pickResponse(entries, thread.id, seq);
  const report = entries.find((e) => e.entry_type === 'parse_report' && JSON.parse(e.payload).response_seq === response.seq);
  const reportPayload = report ? (JSON.parse(report.payload) as { ok: boolean; errors: string[] }) : null;
  const applied = report ? entries.some((e) => e.entry_type === 'mutation_report' && e.work_item_id === report.work_item_id && e.seq > report.seq) : false;
  const base = {
    thread_id: thread.id,
    thread_status: thread.status,
    response_seq: response.seq,
    response_work_item_id: response.work_item_id,
    recorded: { parse_ok: reportPayload?.ok ?? null, errors: reportPayload?.errors ?? [], applied },
    applied: null,
  };
  const noun = itemNoun(op);
  const replayed = (ok: boolean, stage: ReplayReport['replayed']['stage'], errors: string[], items = 0) => ({
    ok,
    stage,
    errors,
    items,
    ...(noun !== 'items' ? { [noun]: items } : {}),
  });
  const envelope = readCompletionBody(JSON.parse(response.payload).body);
  if (!envelope.ok) return { ...base, replayed: replayed(false, 'envelope', [envelope.error]), plan: null };
  const verdict = checkThreadAnswer(ops, thread, envelope.content);
  if (verdict.kind !== 'valid') {
    return { ...base, replayed: replayed(false, 'schema', verdict.kind === 'invalid' ? verdict.errors : [verdict.error.message]), plan: null };
  }
  const target = threadTarget(thread);
  const key = target.key ?? '';
  try {
    const planned = await runWithReads((reads) => {
      const documents = documentsOf(sql, reads, target.project_id);
      return planMutation(op, {
        current: documents.get(target.doc_type, key),
        answer: verdict.value,
        input: threadInput(thread),
        documents,
        provenance: { thread_id: thread.id, work_item_id: '', at: 0 },
      });
    });
    const version = (await getDocumentHead(sql, target.project_id, target.doc_type, key))?.version ?? 0;
    return {
      ...base,
      replayed: replayed(true, null, [], verdict.items),
      plan: { doc_type: target.doc_type, key: target.key ?? null, document_version: version, ...planned.summary },
    };
  } catch (err) {
    if (!(err instanceof OperationCallError)) throw err;
    return { ...base, replayed: replayed(false, 'apply', [err.message], verdict.items), plan: null };
  }
}

/**
 * Queues the recorded answer for application, in one transaction: the thread (and a failed parent)
 * reopens, a new work item is queued, and its `response` entry is a copy marked `replay_of`, with no
 * usage. Refused unless the thread failed and today's check and `apply` accept the answer.
 */
export async function applyReplay(tx: Tx, ops: OperationRegistry, threadId: string, seq: number | null): Promise<ReplayReport> {
  const report = await planReplay(tx.sql, ops, threadId, seq);
  const thread = (await getThread(tx.sql, report.thread_id))!;
  if (thread.status !== 'failed') {
    throw new CommandError(
      'CONFLICT',
      `cannot apply a replay to thread ${threadId}: it is ${thread.status}; only failed threads can be rescued (without --apply, replay shows the difference)`,
    );
  }
  if (!report.replayed.ok) {
    throw new CommandError(
      'CONFLICT',
      `today's validation also rejects the answer recorded in entry ${report.response_seq}: ${report.replayed.errors.slice(0, 5).join('; ')}`,
    );
  }
  const newer = await findActiveThreadByKey(tx.sql, thread.idempotency_key);
  if (newer) throw new CommandError('CONFLICT', `cannot replay thread ${threadId}: thread ${newer.id} is already working on the same request`);
  // The child before its orchestration: the lock order of engine/tx.ts.
  const item: WorkItemRow = await retryChild(tx, ops, thread);
  await reopenFailedParent(tx, ops, thread, 'replay');
  const source = JSON.parse((await listLedgerForThread(tx.sql, thread.id)).find((e) => e.seq === report.response_seq)!.payload) as {
    http_status: number;
    body: unknown;
  };
  appendEntry(tx, (await getThread(tx.sql, thread.id))!, item.id, 'response', item.attempt, {
    http_status: source.http_status,
    request_id: null,
    latency_ms: 0,
    usage: null,
    rate_limit: {},
    body: source.body,
    replay_of: report.response_seq,
  });
  return { ...report, thread_status: 'open', applied: { work_item_id: item.id, sequence: item.sequence, status: item.status } };
}
