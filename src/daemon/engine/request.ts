/**
 * The exact request a work item's next call sends, and the logical model it goes to: its operation's
 * prompt to its model; for a repair, the last prompt, the invalid answer and what was wrong with it;
 * for an escalation (config `on_invalid.escalate_to`), that same conversation to the stronger model.
 * Built by the claim (to route it and reserve its cost), which hands it to the start (starts.ts) to record
 * and send: one build per item, and the request sent is the one the reservation was made for. The start
 * builds it again only without the claim's (a claim whose build failed: the start fails the item with its error).
 */
import type { Sql } from '../../core/sql.js';
import { getLastLedgerEntryOfType, getLedgerEntryOfTypeBefore } from '../../ledger/store.js';
import type { ItemWithThread } from '../../db/item-with-thread.js';
import type { WorkItemRow } from '../../db/schema.js';
import { readCompletionBody } from '../../domain/completion.js';
import type { ClassifiedError } from '../../domain/errors.js';
import { renderRepairPrompt, type ChatRequest } from '../../domain/prompts.js';
import type { OperationRegistry } from '../../operations/registry.js';
import { buildThreadRequest } from './operation-steps.js';

/** A request that could be built: what is sent, and the logical model it goes to. */
export interface BuiltRequest {
  ok: true;
  request: ChatRequest;
  /** The logical model the call goes to. */
  model: string;
  escalated: boolean;
}

export type ItemRequest = BuiltRequest | { ok: false; error: ClassifiedError };

/** `read`: the item, its thread and its project, read together in this transaction (db/item-with-thread.ts). */
export async function buildItemRequest(sql: Sql, ops: OperationRegistry, read: ItemWithThread): Promise<ItemRequest> {
  const { thread, item } = read;
  const built = await buildThreadRequest(sql, ops, thread, read.project);
  if (!built.ok) return built;
  const op = ops.get(thread.kind)!;
  const escalated = item.escalated === 1 && op.escalateTo !== null;
  if (item.repair_count === 0 && !escalated) return { ok: true, request: built.request, model: op.model, escalated: false };
  const conversation = (await repairRequest(sql, item)) ?? built.request;
  if (!escalated) return { ok: true, request: conversation, model: op.model, escalated: false };
  return { ok: true, request: { ...conversation, model: ops.paramsFor(op.escalateTo!).model }, model: op.escalateTo!, escalated: true };
}

/**
 * The repair conversation: the prompt whose answer was invalid, that answer, and what was wrong with
 * it. The prompt is the one before the last response — not simply the last prompt, which may be a
 * repair or escalation call that failed in transit and is being sent again.
 */
async function repairRequest(sql: Sql, item: WorkItemRow): Promise<ChatRequest | null> {
  const response = await getLastLedgerEntryOfType(sql, item.id, 'response');
  const report = await getLastLedgerEntryOfType(sql, item.id, 'parse_report');
  const prompt = response ? await getLedgerEntryOfTypeBefore(sql, item.id, 'prompt', response.seq) : undefined;
  if (!prompt || !response || !report) return null;
  const original = (JSON.parse(prompt.payload) as { request: ChatRequest }).request;
  const envelope = readCompletionBody(JSON.parse(response.payload).body);
  const answer = envelope.ok ? (envelope.content ?? '') : '';
  const errors = (JSON.parse(report.payload) as { errors: string[] }).errors;
  return renderRepairPrompt(original, answer, errors);
}
