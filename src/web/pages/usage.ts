/**
 * Usage: cost per project per UTC day as a stacked bar chart (inline SVG, drawn on the server: no chart
 * library, nothing to download), then the same figures as a table, and the budgets.
 */
import type { Services } from '../../daemon/services/index.js';
import { html, usd, type Html } from '../html.js';

type Report = Awaited<ReturnType<Services['admin']['usage']>>;
type Row = Report['rows'][number];

const W = 760;
const H = 260;
const M = { top: 16, right: 12, bottom: 40, left: 84 };
const MAX_DAYS = 31;
const SERIES = 8;

/** Rounds a maximum up to 1, 2 or 5 × a power of ten, so the axis reads well. */
function niceMax(x: number): number {
  if (x <= 0) return 1;
  const p = 10 ** Math.floor(Math.log10(x));
  return [1, 2, 5, 10].map((m) => m * p).find((v) => v >= x)!;
}

export function costChart(rows: Row[]): Html {
  // Unpriced costs are null: chart tokens unless some cost is known.
  const byCost = rows.some((r) => (r.cost_usd ?? 0) > 0);
  const value = (r: Row) => (byCost ? (r.cost_usd ?? 0) : r.total_tokens);
  const label = (v: number) => (byCost ? usd(v) : `${Math.round(v)} tokens`);
  const axis = (v: number) => (byCost ? usd(v) : v >= 1000 ? `${+(v / 1000).toFixed(1)}k tokens` : `${Math.round(v)} tokens`);
  const days = [...new Set(rows.map((r) => r.day))].sort().slice(-MAX_DAYS);
  const projects = [...new Set(rows.map((r) => r.project_id))].sort();
  if (days.length === 0) return html`<p class="empty">No provider calls yet.</p>`;
  const totals = days.map((d) => rows.filter((r) => r.day === d).reduce((n, r) => n + value(r), 0));
  const max = niceMax(Math.max(...totals));
  const plotW = W - M.left - M.right;
  const plotH = H - M.top - M.bottom;
  const slot = plotW / days.length;
  const barW = Math.max(4, Math.min(40, slot * 0.7));
  const y = (v: number) => M.top + plotH - (v / max) * plotH;
  const every = Math.ceil(days.length / 12);
  const bars = days.map((day, i) => {
    let base = 0;
    const x = M.left + i * slot + (slot - barW) / 2;
    const segments = projects.map((p, pi) => {
      const r = rows.find((row) => row.day === day && row.project_id === p);
      const v = r ? value(r) : 0;
      if (v <= 0) return '';
      const top = y(base + v);
      const h = y(base) - top;
      base += v;
      return html`<rect class="series-${pi % SERIES}" x="${x.toFixed(1)}" y="${top.toFixed(1)}" width="${barW.toFixed(1)}" height="${Math.max(h, 0.5).toFixed(1)}"><title>${p} ${day}: ${label(v)}</title></rect>`;
    });
    const tick =
      i % every === 0 ? html`<text class="tick" x="${(x + barW / 2).toFixed(1)}" y="${H - M.bottom + 16}" text-anchor="middle">${day.slice(5)}</text>` : '';
    return html`${segments}${tick}`;
  });
  const grid = [0, 0.5, 1].map(
    (f) =>
      html`<line class="grid" x1="${M.left}" x2="${W - M.right}" y1="${y(max * f).toFixed(1)}" y2="${y(max * f).toFixed(1)}"></line><text class="tick" x="${M.left - 6}" y="${(y(max * f) + 4).toFixed(1)}" text-anchor="end">${axis(max * f)}</text>`,
  );
  return html`<figure class="chart">
<svg viewBox="0 0 ${W} ${H}" role="img" aria-labelledby="chart-title" width="100%">
<title id="chart-title">${byCost ? 'Cost' : 'Tokens'} per project per day (UTC)</title>
${grid}${bars}
</svg>
<figcaption>${byCost ? 'Cost' : 'Tokens (no price is configured, so cost is unknown)'} per project per UTC day, last ${days.length} ${days.length === 1 ? 'day' : 'days'} with calls.
<ul class="legend">${projects.map((p, pi) => html`<li><svg width="12" height="12" aria-hidden="true"><rect class="series-${pi % SERIES}" width="12" height="12"></rect></svg> ${p}</li>`)}</ul></figcaption>
</figure>`;
}

export async function usagePage(services: Services): Promise<{ title: string; body: Html }> {
  const u = await services.admin.usage(null);
  const t = u.totals;
  const body = html`<h1>Usage</h1>
<p>${t.calls} calls · ${t.total_tokens} tokens · ${usd(t.cost_usd)}${t.wasted_calls > 0 ? ` · ${t.wasted_calls} wasted calls (${usd(t.wasted_cost_usd)})` : ''}${
    t.in_doubt_calls > 0 ? ` · ${t.in_doubt_calls} in doubt (${usd(t.in_doubt_cost_usd)} at most)` : ''
  }</p>
${costChart(u.rows)}
<h2>Per project and day</h2>
${
  u.rows.length === 0
    ? ''
    : html`<table><thead><tr><th>Day</th><th>Project</th><th class="num">Calls</th><th class="num">Tokens</th><th class="num">Cost</th><th class="num">Wasted</th></tr></thead><tbody>${u.rows.map(
        (r) =>
          html`<tr><td>${r.day}</td><td><a href="/projects/${encodeURIComponent(r.project_id)}">${r.project_id}</a></td><td class="num">${r.calls}</td><td class="num">${r.total_tokens}</td><td class="num">${usd(r.cost_usd)}</td><td class="num">${usd(r.wasted_cost_usd)}</td></tr>`,
      )}</tbody></table>`
}
<h2>Budgets (today, ${u.day})</h2>
<table><thead><tr><th>Project</th><th class="num">Spent today</th><th class="num">Spent in all</th><th>Limits</th></tr></thead><tbody>${u.budgets.map(
    (b) =>
      html`<tr><td>${b.project_id}</td><td class="num">${usd(b.spent_today.cost_usd)}</td><td class="num">${usd(b.spent_total.cost_usd)}</td><td><code>${JSON.stringify(b.limits)}</code></td></tr>`,
  )}</tbody></table>`;
  return { title: 'Usage', body };
}
