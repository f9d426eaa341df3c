/**
 * The threads list (filters: status, kind, project; keyset pages) and a thread's page: its state, usage,
 * children, work items, Retry / Cancel, and its ledger as a timeline — what was asked, paid, received,
 * validated and applied, with tokens and cost per call and each entry's place in the hash chain.
 */
import type { Services } from '../../daemon/services/index.js';
import type { ThreadView } from '../../daemon/views.js';
import { THREAD_STATUSES } from '../../domain/states.js';
import type { threadsQuery } from '../../daemon/http/schemas.js';
import type { z } from 'zod';
import { actionButton, documentHref, html, prettyJson, shortId, statusBadge, time, usd, type Html } from '../html.js';

function target(t: ThreadView): string {
  const r = t.target_ref;
  const what = r.epic_id ?? r.key ?? r.date ?? 'all';
  return `${r.project_id} · ${r.doc_type} · ${what}`;
}

function children(t: ThreadView): string {
  if (!t.child_summary) return '';
  return Object.entries(t.child_summary)
    .map(([s, n]) => `${n} ${s}`)
    .join(', ');
}

export function threadsTable(threads: ThreadView[]): Html {
  if (threads.length === 0) return html`<p class="empty">No threads match.</p>`;
  return html`<table class="threads">
<thead><tr><th>Thread</th><th>Kind</th><th>Status</th><th>Target</th><th>Created</th><th class="num">Tokens</th><th class="num">Cost</th><th>Children</th></tr></thead>
<tbody>${threads.map(
    (t) => html`<tr>
  <td><a href="/threads/${t.thread_id}" title="${t.thread_id}"><code>${shortId(t.thread_id)}</code></a></td>
  <td>${t.kind}</td><td>${statusBadge(t.status)}</td><td>${target(t)}</td><td>${time(t.created_at)}</td>
  <td class="num">${t.usage.total_tokens}</td><td class="num">${usd(t.usage.cost_usd)}</td><td>${children(t)}</td>
</tr>`,
  )}</tbody>
</table>`;
}

/** `q` was validated by the API's own query schema (GET /threads): the page and the API filter alike. */
export async function threadsPage(services: Services, q: ThreadsQuery): Promise<{ title: string; body: Html }> {
  const status = q.status?.join(',') ?? null;
  const kind = q.kind ?? null;
  const projectId = q.project_id ?? null;
  const threads = await services.threads.list({
    active: q.active,
    projectId,
    statuses: q.status,
    kind,
    parentId: q.parent_thread_id ?? null,
    afterThreadId: q.cursor ?? null,
    limit: q.limit,
  });
  const projects = await services.projects.list();
  const link = (cursor: string | null) => {
    const p = new URLSearchParams();
    for (const [k, v] of [
      ['status', status],
      ['kind', kind],
      ['project_id', projectId],
      ['cursor', cursor],
    ] as const)
      if (v) p.set(k, v);
    return `/threads?${p.toString()}`;
  };
  const full = threads.length === q.limit;
  const option = (value: string, label: string, selected: boolean) => html`<option value="${value}"${selected ? html` selected` : ''}>${label}</option>`;
  // The filter form sits outside the refreshed part's rows, so what the user picks is kept by a refresh.
  const body = html`<h1>Threads</h1>
<form class="filters" method="get" action="/threads">
  <label>Status <select name="status">${option('', 'any', !status)}${THREAD_STATUSES.map((s) => option(s, s, s === status))}</select></label>
  <label>Kind <input name="kind" value="${kind ?? ''}" placeholder="any" size="22"></label>
  <label>Project <select name="project_id">${option('', 'any', !projectId)}${projects.map((p) => option(p.project_id, p.name, p.project_id === projectId))}</select></label>
  <button type="submit">Filter</button>
</form>
${threadsTable(threads)}
<p class="pager">${q.cursor ? html`<a href="${link(null)}">Newest</a>` : ''}
${full ? html` <a href="${link(threads[threads.length - 1]!.thread_id)}">Older →</a>` : ''}</p>`;
  return { title: 'Threads', body };
}

const pretty = (v: unknown) => prettyJson(v, 20_000, 'GET /threads/{id}/ledger');

type ThreadsQuery = z.output<typeof threadsQuery>;

type LedgerEntry = Awaited<ReturnType<Services['ledger']['thread']>>[number];

/** What a person wants to read in an entry: the messages asked, the answer given, the reports. */
function entryDetail(e: LedgerEntry): Html {
  const p = e.payload as Record<string, any>;
  if (e.entry_type === 'prompt' && Array.isArray(p.request?.messages)) {
    return html`${(p.request.messages as { role: string; content: unknown }[]).map((m) => html`<div class="msg"><span class="role">${m.role}</span><pre>${pretty(m.content)}</pre></div>`)}`;
  }
  if (e.entry_type === 'response') {
    const content = p.body?.choices?.[0]?.message?.content;
    if (typeof content === 'string') {
      let shown: unknown = content;
      try {
        shown = JSON.parse(content);
      } catch {
        // not JSON: shown as received
      }
      return html`<div class="msg"><span class="role">answer</span><pre>${pretty(shown)}</pre></div>`;
    }
  }
  return html`<pre>${pretty(p)}</pre>`;
}

function tokens(e: LedgerEntry): string {
  const u = (e.payload as { usage?: { prompt_tokens: number; completion_tokens: number; total_tokens: number } | null }).usage;
  return u ? `${u.prompt_tokens} + ${u.completion_tokens} = ${u.total_tokens} tokens` : '';
}

function timeline(entries: LedgerEntry[]): Html {
  if (entries.length === 0) return html`<p class="empty">No ledger entries yet.</p>`;
  return html`<ol class="timeline">${entries.map(
    (e) => html`<li class="entry entry-${e.entry_type}" data-seq="${e.seq}">
  <div class="entry-head">
    <span class="seq">#${e.seq}</span> <span class="type">${e.entry_type}</span>
    <span class="muted">${time(e.created_at)}${e.attempt !== null ? ` · attempt ${e.attempt}` : ''}</span>
    ${e.entry_type === 'response' ? html`<span class="cost">${tokens(e)} · ${usd('cost_usd' in e ? e.cost_usd : null)}</span>` : ''}
  </div>
  <div class="summary">${e.summary}</div>
  <div class="hash" title="prev ${e.prev_hash}">hash <code>${e.hash}</code></div>
  <details><summary>details</summary>${entryDetail(e)}</details>
</li>`,
  )}</ol>`;
}

export async function threadPage(services: Services, threadId: string): Promise<{ title: string; body: Html }> {
  const t = await services.threads.get(threadId);
  const ledger = await services.ledger.thread(threadId);
  const kids = t.child_summary ? await services.threads.list({ active: false, projectId: null, parentId: t.thread_id, limit: 1000 }) : [];
  const active = t.status === 'open' || t.status === 'running';
  const u = t.usage;
  const body = html`<p class="crumbs"><a href="/threads">Threads</a> /</p>
<h1>Thread <code>${shortId(t.thread_id)}</code> ${statusBadge(t.status)}</h1>
<section class="actions">
  ${actionButton('Retry', `/threads/${t.thread_id}/retry`, {}, { disabled: t.status !== 'failed', title: 'a new work item on the same thread' })}
  ${actionButton('Cancel', `/threads/${t.thread_id}/cancel`, {}, { disabled: !active, title: 'queued work ends; a call in flight is aborted' })}
</section>
<dl class="facts">
  <dt>Id</dt><dd><code>${t.thread_id}</code></dd>
  <dt>Kind</dt><dd>${t.kind}</dd>
  <dt>Target</dt><dd><a href="${documentHref(t.target_ref)}" title="the document this thread writes">${target(t)}</a> · <a href="/projects/${encodeURIComponent(t.target_ref.project_id)}">project</a></dd>
  ${t.parent_thread_id ? html`<dt>Parent</dt><dd><a href="/threads/${t.parent_thread_id}"><code>${t.parent_thread_id}</code></a></dd>` : ''}
  <dt>Created</dt><dd>${time(t.created_at)}</dd>
  <dt>Closed</dt><dd>${time(t.closed_at)}</dd>
  <dt>Usage</dt><dd>${u.calls} calls · ${u.total_tokens} tokens (${u.prompt_tokens} prompt + ${u.completion_tokens} completion) · ${usd(u.cost_usd)}${
    u.wasted_calls > 0 ? ` · ${u.wasted_calls} wasted (${usd(u.wasted_cost_usd)})` : ''
  }${u.in_doubt_calls > 0 ? ` · ${u.in_doubt_calls} in doubt` : ''}</dd>
</dl>
${kids.length > 0 ? html`<h2>Children</h2>${threadsTable(kids)}` : ''}
${
  t.work_items.length > 0
    ? html`<h2>Work items</h2><table><thead><tr><th class="num">Seq</th><th>Status</th><th>Attempt</th><th>Lock</th><th>Error</th></tr></thead><tbody>${t.work_items.map(
        (w) =>
          html`<tr><td class="num">${w.sequence}</td><td>${statusBadge(w.status)}</td><td>${w.attempt}/${w.max_attempts}</td><td><code>${w.lock_scope}</code></td><td>${
            w.error_code ? `${w.error_code}: ${w.error_message ?? ''}` : ''
          }</td></tr>`,
      )}</tbody></table>`
    : ''
}
<h2>Ledger</h2>
${timeline(ledger)}`;
  return { title: `Thread ${shortId(t.thread_id)}`, body };
}
