/**
 * The exact request a work item's next call sends: its operation's prompt, or for a repair the last prompt,
 * the invalid answer and what was wrong with it. Used by the claim (to reserve its cost) and by
 * `startWorkItem` (to record and send it); both read the same stored state, so they agree.
 */
import type { Sql } from '../../core/sql.js';
import { getLastLedgerEntryOfType } from '../../ledger/store.js';
import type { ThreadRow, WorkItemRow } from '../../db/schema.js';
import { readCompletionBody } from '../../domain/completion.js';
import type { ClassifiedError } from '../../domain/errors.js';
import { renderRepairPrompt, type ChatRequest } from '../../domain/prompts.js';
import type { OperationRegistry } from '../../operations/registry.js';
import { buildThreadRequest } from './operation-steps.js';

export async function buildItemRequest(
  sql: Sql,
  ops: OperationRegistry,
  thread: ThreadRow,
  item: WorkItemRow,
): Promise<{ ok: true; request: ChatRequest } | { ok: false; error: ClassifiedError }> {
  const built = await buildThreadRequest(sql, ops, thread);
  if (!built.ok || item.repair_count === 0) return built;
  return { ok: true, request: (await repairRequest(sql, item)) ?? built.request };
}

/** The repair conversation: the last prompt, the invalid answer, and what was wrong with it. */
async function repairRequest(sql: Sql, item: WorkItemRow): Promise<ChatRequest | null> {
  const prompt = await getLastLedgerEntryOfType(sql, item.id, 'prompt');
  const response = await getLastLedgerEntryOfType(sql, item.id, 'response');
  const report = await getLastLedgerEntryOfType(sql, item.id, 'parse_report');
  if (!prompt || !response || !report) return null;
  const original = (JSON.parse(prompt.payload) as { request: ChatRequest }).request;
  const envelope = readCompletionBody(JSON.parse(response.payload).body);
  const answer = envelope.ok ? (envelope.content ?? '') : '';
  const errors = (JSON.parse(report.payload) as { errors: string[] }).errors;
  return renderRepairPrompt(original, answer, errors);
}
