/** The daemon's side: schedules with their recent runs, and health with the provider's breakers. */
import type { Services } from '../../daemon/services/index.js';
import { html, shortId, statusBadge, time, type Html } from '../html.js';

export async function schedulesPage(services: Services): Promise<{ title: string; body: Html }> {
  const schedules = await services.schedules.list(false);
  const runs = await services.schedules.runs(null, 50);
  const body = html`<h1>Schedules</h1>
${
  schedules.length === 0
    ? html`<p class="empty">No schedule. Add one with <code>combine schedule add --project &lt;id&gt; --operation &lt;name&gt; --cron "0 8 * * *"</code>.</p>`
    : html`<table><thead><tr><th>Schedule</th><th>Project</th><th>Operation</th><th>Cron</th><th>Status</th><th>Next run</th><th>Last run</th></tr></thead><tbody>${schedules.map(
        (s) =>
          html`<tr><td><code title="${s.schedule_id}">${shortId(s.schedule_id)}</code></td><td>${s.project_id}</td><td>${s.operation}</td><td><code>${s.cron}</code> ${s.timezone}</td><td>${statusBadge(s.status)}</td><td>${time(
            s.next_run_at,
          )}</td><td>${s.last_run ? html`${s.last_run.period_key} ${statusBadge(s.last_run.status)}` : '–'}</td></tr>`,
      )}</tbody></table>`
}
<h2>Recent runs</h2>
${
  runs.length === 0
    ? html`<p class="empty">No run yet.</p>`
    : html`<table><thead><tr><th>Run</th><th>Schedule</th><th>Period</th><th>Status</th><th>Thread</th><th class="num">Tokens</th><th>Finished</th><th>Error</th></tr></thead><tbody>${runs.map(
        (r) =>
          html`<tr><td><code title="${r.run_id}">${shortId(r.run_id)}</code></td><td><code>${shortId(r.schedule_id)}</code></td><td>${r.period_key}</td><td>${statusBadge(r.status)}</td><td>${
            r.thread_id
              ? html`<a href="/threads/${r.thread_id}"><code>${shortId(r.thread_id)}</code></a> ${r.thread_status ? statusBadge(r.thread_status) : ''}`
              : '–'
          }</td><td class="num">${r.usage?.total_tokens ?? '–'}</td><td>${time(r.finished_at)}</td><td>${r.error ?? ''}</td></tr>`,
      )}</tbody></table>`
}`;
  return { title: 'Schedules', body };
}

export async function healthPage(services: Services): Promise<{ title: string; body: Html }> {
  const h = await services.admin.health();
  const s = await services.admin.stats();
  const counts = (o: Record<string, number>) =>
    Object.entries(o)
      .map(([k, v]) => `${v} ${k}`)
      .join(', ') || 'none';
  const body = html`<h1>Health ${statusBadge(h.status)}</h1>
<table><thead><tr><th>Check</th><th>Result</th></tr></thead><tbody>${Object.entries(h.checks).map(
    ([k, ok]) =>
      html`<tr><td>${k.replaceAll('_', ' ')}</td><td>${ok ? html`<span class="badge badge-complete">ok</span>` : html`<span class="badge badge-failed">failing</span>`}</td></tr>`,
  )}</tbody></table>
<h2>Provider circuit breakers</h2>
<table><thead><tr><th>Endpoint</th><th>State</th><th class="num">Consecutive failures</th><th>Open until</th><th class="num">Times opened</th></tr></thead><tbody>${Object.entries(
    h.breakers,
  ).map(
    ([endpoint, b]) =>
      html`<tr><td><code>${endpoint}</code></td><td>${statusBadge(b.state)}</td><td class="num">${b.consecutive_failures}</td><td>${time(b.open_until)}</td><td class="num">${b.times_opened}</td></tr>`,
  )}</tbody></table>
<h2>Activity</h2>
<dl class="facts">
  <dt>Threads</dt><dd>${counts(s.threads)}</dd>
  <dt>Work items</dt><dd>${counts(s.work_items)}</dd>
  <dt>In flight</dt><dd>${s.in_flight}</dd>
  <dt>Ledger entries</dt><dd>${s.ledger_entries}</dd>
  <dt>Migrations</dt><dd>${h.migrations.applied} applied, ${h.migrations.pending} pending</dd>
</dl>`;
  return { title: 'Health', body };
}
