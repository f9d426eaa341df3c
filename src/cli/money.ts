/** Money as people read it: a price that is not known is "unpriced", never "$0". */
import type { UsageView } from '../daemon/views.js';
import { plural } from './output.js';

/** "$0.0123", "$0.000004", or "unpriced" for a cost no price is known for (null in JSON). */
export function formatUsd(n: number | null): string {
  if (n === null) return 'unpriced';
  return `$${n.toFixed(n > 0 && n < 0.01 ? 6 : 4)}`;
}

/** A usage's cost: "$0.0123", "unpriced", "$0.0123 + 2 unpriced" when only some calls had a price, "-" for no calls. */
export function costText(u: Pick<UsageView, 'cost_usd' | 'calls' | 'unpriced_calls'>): string {
  if (u.calls === 0) return '-';
  if (u.cost_usd === null) return 'unpriced';
  return u.unpriced_calls > 0 ? `${formatUsd(u.cost_usd)} + ${u.unpriced_calls} unpriced` : formatUsd(u.cost_usd);
}

/** "3 calls, 1234 tok, $0.0123 — 2 wasted calls (800 tok), 1 in doubt (≤2100 tok)". */
export function describeUsage(u: UsageView): string {
  const extras = [
    u.wasted_calls > 0 ? `${plural(u.wasted_calls, 'wasted call')} (${u.wasted_tokens} tok)` : '',
    u.in_doubt_calls > 0 ? `${u.in_doubt_calls} in doubt (≤${u.in_doubt_tokens} tok)` : '',
  ].filter(Boolean);
  const cost = u.calls > 0 ? `, ${costText(u)}` : '';
  return `${plural(u.calls, 'call')}, ${u.total_tokens} tok${cost}${extras.length ? ` — ${extras.join(', ')}` : ''}`;
}
