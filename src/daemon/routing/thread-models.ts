/**
 * Which models a thread's calls went to, for `combine thread`: per logical model its real model,
 * calls, tokens and cost, and whether an invalid answer escalated to a stronger model and what that
 * cost. Read from the thread's ledger — each `prompt` entry names its logical and real model, each
 * `response` its usage — and the settled charges.
 */
import { listResponseCostsForThread } from '../../db/charges.js';
import type { Sql } from '../../core/sql.js';
import { listLedgerForThread } from '../../ledger/store.js';

export interface ModelUse {
  logical_model: string;
  model: string;
  /** Prompts sent (each a call, paid or not). */
  calls: number;
  total_tokens: number;
  cost_usd: number;
}

export interface ThreadModels {
  models: ModelUse[];
  escalated: boolean;
  /** The escalation calls (to the stronger model): what they cost. */
  escalation: ModelUse | null;
}

interface PromptPayload {
  logical_model?: string;
  model?: string;
  request?: { model?: string };
  escalation?: boolean;
}

const usd = (n: number) => Math.round(n * 1e6) / 1e6;

export async function threadModelsView(sql: Sql, threadId: string): Promise<ThreadModels> {
  const costs = new Map((await listResponseCostsForThread(sql, threadId)).map((c) => [c.response_seq, c.cost_usd ?? 0]));
  const uses = new Map<string, ModelUse>();
  let escalation: ModelUse | null = null;
  // The prompt each work item's next response answers.
  const lastPrompt = new Map<string | null, { use: ModelUse; escalation: boolean }>();
  for (const e of await listLedgerForThread(sql, threadId)) {
    if (e.entry_type === 'prompt') {
      const p = JSON.parse(e.payload) as PromptPayload;
      // Prompts recorded before the router existed name only the request's model.
      const logical = p.logical_model ?? 'default';
      const model = p.model ?? p.request?.model ?? 'unknown';
      const key = `${logical}\n${model}`;
      const use = uses.get(key) ?? { logical_model: logical, model, calls: 0, total_tokens: 0, cost_usd: 0 };
      uses.set(key, use);
      use.calls++;
      if (p.escalation) {
        escalation ??= { logical_model: logical, model, calls: 0, total_tokens: 0, cost_usd: 0 };
        escalation.calls++;
      }
      lastPrompt.set(e.work_item_id, { use, escalation: p.escalation === true });
    } else if (e.entry_type === 'response') {
      const asked = lastPrompt.get(e.work_item_id);
      if (!asked) continue; // a replayed answer: no call
      const usage = (JSON.parse(e.payload) as { usage?: { total_tokens?: number } | null }).usage;
      const tokens = usage?.total_tokens ?? 0;
      const cost = costs.get(e.seq) ?? 0;
      asked.use.total_tokens += tokens;
      asked.use.cost_usd += cost;
      if (asked.escalation && escalation) {
        escalation.total_tokens += tokens;
        escalation.cost_usd += cost;
      }
      lastPrompt.delete(e.work_item_id);
    }
  }
  const round = (u: ModelUse): ModelUse => ({ ...u, cost_usd: usd(u.cost_usd) });
  return { models: [...uses.values()].map(round), escalated: escalation !== null, escalation: escalation ? round(escalation) : null };
}
