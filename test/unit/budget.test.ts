/** Budget arithmetic: estimates are upper bounds, verdicts name the limit and say when it may pass. */
import { describe, expect, it } from 'vitest';
import { checkBudget, costUsd, estimateCall, nextUtcMidnight, utcDay } from '../../src/domain/budget.js';
import { storyRequest } from '../helpers/operations.js';

const NOW = Date.parse('2026-03-10T15:30:00Z');
const request = storyRequest(
  { id: 'p', name: 'P' },
  { id: 'E1', title: 'Checkout', description: 'Pay for the cart.' },
  { model: 'm', temperature: 0, maxTokens: 1000 },
);
const none = { tokens: 0, cost_usd: 0 };

describe('budgets', () => {
  it('the estimate is the prompt (over-estimated) plus max_tokens, priced per million', () => {
    const e = estimateCall(request, { input_per_million_usd: 1, output_per_million_usd: 4 });
    const chars = request.messages.reduce((n, m) => n + m.content.length, 0);
    expect(e.tokens - 1000).toBeGreaterThan(chars / 4); // above the usual ~4 characters per token
    expect(e.cost_usd).toBeCloseTo(((e.tokens - 1000) * 1 + 1000 * 4) / 1e6, 9);
    expect(costUsd(undefined, 100, 100)).toBe(0);
  });

  it('fits while spent + estimate stays within every limit', () => {
    expect(checkBudget({ total_tokens: 1000 }, { today: none, total: { tokens: 400, cost_usd: 0 } }, { tokens: 600, cost_usd: 0 }, NOW)).toEqual({ ok: true });
    const over = checkBudget({ total_tokens: 1000 }, { today: none, total: { tokens: 401, cost_usd: 0 } }, { tokens: 600, cost_usd: 0 }, NOW);
    expect(over).toMatchObject({ ok: false, retryAt: null });
    expect(over.ok === false && over.reason).toContain('total_tokens 1000 tokens');
  });

  it('a daily limit resumes at the next UTC midnight, unless the call alone is bigger than the limit', () => {
    const spent = { today: { tokens: 900, cost_usd: 0.9 }, total: { tokens: 900, cost_usd: 0.9 } };
    expect(checkBudget({ daily_cost_usd: 1 }, spent, { tokens: 10, cost_usd: 0.2 }, NOW)).toMatchObject({
      ok: false,
      retryAt: Date.parse('2026-03-11T00:00:00Z'),
    });
    expect(checkBudget({ daily_tokens: 50 }, spent, { tokens: 60, cost_usd: 0 }, NOW)).toMatchObject({ ok: false, retryAt: null });
    expect(utcDay(NOW)).toBe('2026-03-10');
    expect(nextUtcMidnight(Date.parse('2026-03-10T23:59:59.999Z'))).toBe(Date.parse('2026-03-11T00:00:00Z'));
  });
});
