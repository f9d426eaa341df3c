/**
 * `combine replay`: runs today's parsing, validation and mutation planning over a thread's recorded
 * answer — no provider call — and reports how the result differs from what is applied now. With
 * `--apply` the answer goes through the normal path: the failed thread reopens with a new work item
 * whose first ledger entry is a copy of the recorded response marked `replay_of`; the engine claims
 * it under the epic lock, sees the answer is already recorded and validates and applies it without a
 * call (engine/completer.ts `startWorkItem`).
 */
import type { Db } from '../db/connection.js';
import { listLedgerForThread } from '../db/ledger.js';
import { getDocument } from '../db/projects.js';
import type { LedgerRow, ThreadRow, WorkItemRow } from '../db/schema.js';
import { findActiveThreadByKey, getThread, listChildThreads } from '../db/threads.js';
import type { AnswerRules } from '../domain/answer-rules.js';
import { applyStoriesToBacklog, storyBacklogSchema } from '../domain/backlog.js';
import { readCompletionBody } from '../domain/completion.js';
import { EPIC_ARCHITECTURE, STORY_BACKLOG, STORY_GENERATE_EPIC } from '../domain/operations.js';
import { epicArchitectureSchema } from '../domain/project.js';
import type { RetryPolicy } from '../domain/retry.js';
import { diffStories, type StoryDiff } from '../domain/story-diff.js';
import { CommandError, reopenFailedParent, retryChild } from './commands.js';
import { parseStoryAnswer, readTargetRef } from './engine/story-operation.js';
import { appendEntry, type Tx } from './engine/tx.js';

export interface ReplayReport {
  thread_id: string;
  thread_status: string;
  /** The recorded response that was replayed. */
  response_seq: number;
  response_work_item_id: string | null;
  /** What happened to that answer when it was recorded. */
  recorded: { parse_ok: boolean | null; errors: string[]; applied: boolean };
  /** What today's parser and validation make of it. */
  replayed: { ok: boolean; stage: 'envelope' | 'schema' | null; errors: string[]; stories: number };
  /** The mutation today's code would plan, and how it differs from what is applied now. */
  plan: {
    doc_type: string;
    epic_id: string;
    document_version: number;
    stories_before: number;
    stories_after: number;
    replaced: boolean;
    difference: StoryDiff;
  } | null;
  /** Set with --apply: the work item that will apply the answer (no provider call). */
  applied: { work_item_id: string; sequence: number; status: string } | null;
}

function replayableThread(db: Db, threadId: string): ThreadRow {
  const thread = getThread(db, threadId);
  if (!thread) throw new CommandError('NOT_FOUND', `no thread "${threadId}"`);
  if (thread.kind !== STORY_GENERATE_EPIC) {
    const failed = listChildThreads(db, thread.id).filter((c) => c.status === 'failed').map((c) => c.id);
    const hint = failed.length > 0 ? `; its failed children: ${failed.join(', ')}` : '';
    throw new CommandError('BAD_REQUEST', `thread ${threadId} is a ${thread.kind}: replay one epic thread at a time${hint}`);
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
export function planReplay(db: Db, rules: AnswerRules, threadId: string, seq: number | null): ReplayReport {
  const thread = replayableThread(db, threadId);
  const entries = listLedgerForThread(db, thread.id);
  const response = pickResponse(entries, thread.id, seq);
  const report = entries.find((e) => e.entry_type === 'parse_report' && JSON.parse(e.payload).response_seq === response.seq);
  const reportPayload = report ? (JSON.parse(report.payload) as { ok: boolean; errors: string[] }) : null;
  const applied = report
    ? entries.some((e) => e.entry_type === 'mutation_report' && e.work_item_id === report.work_item_id && e.seq > report.seq)
    : false;
  const base = {
    thread_id: thread.id,
    thread_status: thread.status,
    response_seq: response.seq,
    response_work_item_id: response.work_item_id,
    recorded: { parse_ok: reportPayload?.ok ?? null, errors: reportPayload?.errors ?? [], applied },
    applied: null,
  };
  const envelope = readCompletionBody(JSON.parse(response.payload).body);
  if (!envelope.ok) return { ...base, replayed: { ok: false, stage: 'envelope', errors: [envelope.error], stories: 0 }, plan: null };
  const parsed = parseStoryAnswer(envelope.content, rules);
  if (!parsed.ok) return { ...base, replayed: { ok: false, stage: 'schema', errors: parsed.errors, stories: 0 }, plan: null };
  const stories = parsed.value.stories;
  const replayed = { ok: true, stage: null, errors: [], stories: stories.length };

  const target = readTargetRef(thread);
  const arch = getDocument(db, target.project_id, EPIC_ARCHITECTURE);
  const epics = arch ? epicArchitectureSchema.parse(JSON.parse(arch.content)).epics : [];
  const epic = epics.find((e) => e.id === target.epic_id);
  const doc = getDocument(db, target.project_id, STORY_BACKLOG);
  if (!epic || !doc) {
    return { ...base, replayed: { ...replayed, ok: false, errors: [`epic ${target.epic_id} of project ${target.project_id} no longer exists`] }, plan: null };
  }
  const backlog = storyBacklogSchema.parse(JSON.parse(doc.content));
  const current = backlog.epics.find((e) => e.epic_id === epic.id)?.stories ?? [];
  const change = applyStoriesToBacklog(backlog, epic, epics.map((e) => e.id), stories, { thread_id: thread.id, work_item_id: '', generated_at: 0 });
  return {
    ...base,
    replayed,
    plan: {
      doc_type: STORY_BACKLOG,
      epic_id: epic.id,
      document_version: doc.version,
      stories_before: change.summary.stories_before,
      stories_after: change.summary.stories_after,
      replaced: change.summary.replaced,
      difference: diffStories(current, stories),
    },
  };
}

/**
 * Queues the recorded answer for application, in one transaction: the thread (and a failed parent)
 * reopens, a new work item is queued, and its `response` entry is a copy marked `replay_of`, with no
 * usage. Refused unless the thread failed and today's validation accepts the answer.
 */
export function applyReplay(
  tx: Tx,
  rules: AnswerRules,
  policyFor: (kind: string) => RetryPolicy,
  threadId: string,
  seq: number | null,
): ReplayReport {
  const report = planReplay(tx.db, rules, threadId, seq);
  const thread = getThread(tx.db, report.thread_id)!;
  if (thread.status !== 'failed') {
    throw new CommandError(
      'CONFLICT',
      `cannot apply a replay to thread ${threadId}: it is ${thread.status}; only failed threads can be rescued (without --apply, replay shows the difference)`,
    );
  }
  if (!report.replayed.ok) {
    throw new CommandError('CONFLICT', `today's validation also rejects the answer recorded in entry ${report.response_seq}: ${report.replayed.errors.slice(0, 5).join('; ')}`);
  }
  const newer = findActiveThreadByKey(tx.db, thread.idempotency_key);
  if (newer) throw new CommandError('CONFLICT', `cannot replay thread ${threadId}: thread ${newer.id} is already working on the same request`);
  reopenFailedParent(tx, thread, 'replay');
  const item: WorkItemRow = retryChild(tx, policyFor, thread);
  const source = JSON.parse(listLedgerForThread(tx.db, thread.id).find((e) => e.seq === report.response_seq)!.payload) as {
    http_status: number;
    body: unknown;
  };
  appendEntry(tx, getThread(tx.db, thread.id)!, item.id, 'response', item.attempt, {
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
