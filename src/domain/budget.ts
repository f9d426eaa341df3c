/**
 * Cost and budgets, pure: what a call may cost at most (reserved before it is made), what it did cost
 * (from the response's usage), and whether a project can afford the next call.
 *
 * Budgets count, per project, every call that may have been billed: settled calls at their real usage,
 * reserved (in flight) and in-doubt calls at their estimated maximum. Days are UTC days.
 */
import type { ChatRequest } from './prompts.js';

/** USD per million tokens, as providers publish them. */
export interface ModelPrice {
  input_per_million_usd: number;
  output_per_million_usd: number;
}

/** Per-project limits; an absent field is no limit. */
export interface BudgetLimits {
  daily_tokens?: number | undefined;
  total_tokens?: number | undefined;
  daily_cost_usd?: number | undefined;
  total_cost_usd?: number | undefined;
}

export interface Spend {
  tokens: number;
  cost_usd: number;
}

export interface CallEstimate {
  /** Estimated prompt tokens plus max_tokens: the most this call can bill. */
  tokens: number;
  cost_usd: number;
}

const DAY_MS = 86_400_000;

/** The UTC day of `ms`, as YYYY-MM-DD. */
export function utcDay(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

export function nextUtcMidnight(ms: number): number {
  return (Math.floor(ms / DAY_MS) + 1) * DAY_MS;
}

/**
 * A deliberately high estimate of a request's prompt tokens without a tokenizer: one token per three
 * characters of everything sent (messages and the answer schema), plus per-message framing. Typical
 * English runs near four characters per token, so this over-reserves; settlement corrects it.
 */
export function estimatePromptTokens(request: ChatRequest): number {
  let chars = JSON.stringify(request.response_format ?? null).length;
  for (const m of request.messages) chars += m.content.length + m.role.length;
  return Math.ceil(chars / 3) + 4 * request.messages.length + 3;
}

export function costUsd(price: ModelPrice | undefined, promptTokens: number, completionTokens: number): number {
  if (!price) return 0;
  return (promptTokens * price.input_per_million_usd + completionTokens * price.output_per_million_usd) / 1_000_000;
}

/** The most `request` can bill: the prompt estimate plus `max_tokens` of answer. */
export function estimateCall(request: ChatRequest, price: ModelPrice | undefined): CallEstimate {
  const prompt = estimatePromptTokens(request);
  return { tokens: prompt + request.max_tokens, cost_usd: costUsd(price, prompt, request.max_tokens) };
}

export type BudgetVerdict =
  | { ok: true }
  | {
      ok: false;
      /** Which limit, in words a person can act on. */
      reason: string;
      /** When the budget allows the call again by itself (next UTC midnight for a daily limit); null if only raising it helps. */
      retryAt: number | null;
    };

/**
 * Whether a call with this estimate fits the project's limits given what is already spent today and
 * in total. A call that alone exceeds a limit never fits; it waits until the limit is raised.
 */
export function checkBudget(limits: BudgetLimits, spent: { today: Spend; total: Spend }, estimate: CallEstimate, now: number): BudgetVerdict {
  const checks: { limit: number | undefined; used: number; need: number; name: string; daily: boolean; unit: string }[] = [
    { limit: limits.total_tokens, used: spent.total.tokens, need: estimate.tokens, name: 'total_tokens', daily: false, unit: 'tokens' },
    { limit: limits.total_cost_usd, used: spent.total.cost_usd, need: estimate.cost_usd, name: 'total_cost_usd', daily: false, unit: 'USD' },
    { limit: limits.daily_tokens, used: spent.today.tokens, need: estimate.tokens, name: 'daily_tokens', daily: true, unit: 'tokens' },
    { limit: limits.daily_cost_usd, used: spent.today.cost_usd, need: estimate.cost_usd, name: 'daily_cost_usd', daily: true, unit: 'USD' },
  ];
  const over = checks.filter((c) => c.limit !== undefined && c.used + c.need > c.limit);
  if (over.length === 0) return { ok: true };
  const fmt = (n: number, unit: string) => (unit === 'USD' ? `$${n.toFixed(4)}` : `${Math.ceil(n)} ${unit}`);
  const reason = over
    .map((c) => `${c.name} ${fmt(c.limit!, c.unit)}: ${fmt(c.used, c.unit)} spent or reserved + ${fmt(c.need, c.unit)} for this call`)
    .join('; ');
  // Waiting for midnight helps only if every exceeded limit is a daily one the call fits on its own.
  const midnightHelps = over.every((c) => c.daily && c.need <= c.limit!);
  return { ok: false, reason, retryAt: midnightHelps ? nextUtcMidnight(now) : null };
}
