/**
 * A project's documents, whatever operation writes them: the list on the project page, and a
 * document's page — its current version and content, and the threads that wrote it or are writing it.
 * State comes from documents and threads only, read at every request, so a document being written
 * shows which thread is at it until the page's refresh shows the new version.
 */
import type { Services } from '../../daemon/services/index.js';
import { CommandError } from '../../core/errors.js';
import type { DocumentView, ThreadView } from '../../daemon/views.js';
import { documentHref, html, prettyJson, shortId, statusBadge, time, type Html } from '../html.js';
import { threadsTable } from './threads.js';

/** Threads of the project a document page lists (the newest); its active ones are always all read. */
const RECENT_THREADS = 200;

const targets = (t: ThreadView, docType: string, key: string | null) => t.target_ref.doc_type === docType && (t.target_ref.key ?? null) === key;

function writing(t: ThreadView | undefined): Html | string {
  return t
    ? html`<span class="in-progress">Being written</span> by <a href="/threads/${t.thread_id}">thread <code>${shortId(t.thread_id)}</code></a> ${statusBadge(t.status)}`
    : '';
}

/** The project page's list: each document with the thread writing it now, and those not written yet that a thread is writing. */
export async function documentsSection(services: Services, projectId: string): Promise<Html> {
  const docs = await services.projects.documents(projectId);
  const active = await services.threads.list({ active: true, projectId, limit: 1000 });
  const writerOf = (docType: string, key: string | null) => active.find((t) => targets(t, docType, key));
  const unwritten = new Map<string, ThreadView>();
  for (const t of active) {
    const key = t.target_ref.key ?? null;
    if (!docs.some((d) => d.doc_type === t.target_ref.doc_type && d.key === key)) unwritten.set(`${t.target_ref.doc_type}\n${key ?? ''}`, t);
  }
  const rows = [
    ...docs.map(
      (d) =>
        html`<tr data-doc="${d.doc_type}/${d.key ?? ''}"><td><a href="${documentHref(d)}">${d.doc_type}</a></td><td>${d.key ?? '–'}</td><td class="num">${d.version}</td><td>${time(
          d.updated_at,
        )}</td><td>${writing(writerOf(d.doc_type, d.key))}</td></tr>`,
    ),
    ...[...unwritten.values()].map(
      (t) =>
        html`<tr data-doc="${t.target_ref.doc_type}/${t.target_ref.key ?? ''}"><td><a href="${documentHref(t.target_ref)}">${t.target_ref.doc_type}</a></td><td>${
          t.target_ref.key ?? '–'
        }</td><td class="num">–</td><td>–</td><td>${writing(t)}</td></tr>`,
    ),
  ];
  return html`<h2>Documents</h2>
${
  rows.length === 0
    ? html`<p class="empty">No document yet.</p>`
    : html`<table class="documents"><thead><tr><th>Document</th><th>Key</th><th class="num">Version</th><th>Updated</th><th>State</th></tr></thead><tbody>${rows}</tbody></table>`
}
<p class="muted">Write one with an operation: <a href="/operations?project_id=${encodeURIComponent(projectId)}">run an operation on this project</a>.</p>`;
}

/** The document, or null when it does not exist (yet): a thread may be writing it, or have failed to. */
async function readDocument(
  services: Services,
  projectId: string,
  docType: string,
  key: string | null,
): Promise<{ doc: DocumentView | null; missing: CommandError | null }> {
  try {
    return { doc: await services.projects.document(projectId, docType, key), missing: null };
  } catch (err) {
    if (err instanceof CommandError && (err.kind === 'NOT_FOUND' || err.code === 'NOT_READY')) return { doc: null, missing: err };
    throw err;
  }
}

/** `/projects/{id}/documents/{doc_type}?key=`: `key` absent is the type's one document, or its newest keyed one. */
export async function documentPage(services: Services, projectId: string, docType: string, key: string | null): Promise<{ title: string; body: Html }> {
  const project = await services.projects.get(projectId);
  const { doc, missing } = await readDocument(services, projectId, docType, key);
  const shownKey = doc ? doc.key : key;
  const threads = (await services.threads.list({ active: false, projectId, limit: RECENT_THREADS })).filter((t) => targets(t, docType, shownKey));
  const writer = (await services.threads.list({ active: true, projectId, limit: 1000 })).find((t) => targets(t, docType, shownKey));
  // Neither the document nor any thread for it: a wrong address, answered as the API does (404).
  if (!doc && !writer && threads.length === 0) throw missing!;
  const cli = `combine doc ${projectId} ${docType}${shownKey ? ` --key ${shownKey}` : ''}`;
  const body = html`<p class="crumbs"><a href="/">Projects</a> / <a href="/projects/${encodeURIComponent(projectId)}">${project.name}</a> /</p>
<h1>${docType}${shownKey ? html` <span class="muted">${shownKey}</span>` : ''}</h1>
${writer ? html`<p data-testid="document-state">${writing(writer)}</p>` : ''}
${
  doc
    ? html`<dl class="facts">
  <dt>Project</dt><dd><a href="/projects/${encodeURIComponent(projectId)}">${project.name}</a> <code>${projectId}</code></dd>
  <dt>Key</dt><dd>${doc.key ?? '–'}</dd>
  <dt>Version</dt><dd data-testid="document-version">${doc.version}</dd>
  <dt>Updated</dt><dd>${time(doc.updated_at)}</dd>
  <dt>Read it</dt><dd><code>${cli}</code></dd>
</dl>
<h2>Content</h2>
<pre class="document" data-testid="document-content">${prettyJson(doc.content, 200_000, 'GET /projects/{id}/documents/{doc_type}')}</pre>`
    : html`<p class="empty" data-testid="document-content">Not written yet${writer ? '' : html`: the last thread for it ended ${statusBadge(threads[0]!.status)}`}.</p>`
}
<h2>Threads for this document</h2>
${threadsTable(threads)}`;
  return { title: `${docType}${shownKey ? ` ${shownKey}` : ''} · ${project.name}`, body };
}
