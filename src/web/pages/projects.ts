/**
 * The projects list and a project's page: for a project with epics, the story view — each epic with its
 * story count and a `Generate` button that is disabled, with `Generation in progress`, while a thread
 * for the epic is open or running; `Generate all` with a progress bar of its children — and for every
 * project its documents (documents.ts). Everything shown comes from threads and documents, read fresh
 * at every request, so a reload or another tab shows the same state.
 */
import type { Services } from '../../daemon/services/index.js';
import type { ThreadView } from '../../daemon/views.js';
import { actionButton, html, shortId, statusBadge, time, type Html } from '../html.js';
import { documentsSection } from './documents.js';

export async function projectsPage(services: Services): Promise<{ title: string; body: Html }> {
  const projects = await services.projects.list();
  const active = await services.threads.list({ active: true, projectId: null, limit: 1000 });
  const activeCount = (id: string) => active.filter((t) => t.target_ref.project_id === id).length;
  const body = html`<h1>Projects</h1>
${
  projects.length === 0
    ? html`<p class="empty">No project yet. Import one with <code>combine project import &lt;file.json&gt;</code>.</p>`
    : html`<table>
<thead><tr><th>Project</th><th>Id</th><th class="num">Epics</th><th class="num">Active threads</th></tr></thead>
<tbody>${projects.map(
        (p) =>
          html`<tr><td><a href="/projects/${encodeURIComponent(p.project_id)}">${p.name}</a></td><td><code>${p.project_id}</code></td><td class="num">${p.epics.length}</td><td class="num">${activeCount(p.project_id)}</td></tr>`,
      )}</tbody>
</table>`
}`;
  return { title: 'Projects', body };
}

const isActive = (t: ThreadView) => t.status === 'open' || t.status === 'running';
const terminalChildren = (s: Record<string, number>) => (s.complete ?? 0) + (s.failed ?? 0) + (s.canceled ?? 0);

/** The whole-project orchestration is the thread with children and no single epic as its target. */
const isOrchestration = (t: ThreadView) => t.child_summary !== null && t.target_ref.epic_id === undefined;

function generateAllSection(projectId: string, threads: ThreadView[]): Html {
  const running = threads.find((t) => isOrchestration(t) && isActive(t));
  const last = running ?? threads.find(isOrchestration);
  let progress: Html | string = '';
  if (last?.child_summary) {
    const total = Object.values(last.child_summary).reduce((a, b) => a + b, 0);
    const done = terminalChildren(last.child_summary);
    const failed = last.child_summary.failed ?? 0;
    progress = html`<div class="progress">
  <progress max="${total}" value="${done}" aria-label="Generate all progress">${done} of ${total}</progress>
  <span>${done} of ${total} epics done${failed > 0 ? `, ${failed} failed` : ''} · <a href="/threads/${last.thread_id}">thread ${shortId(last.thread_id)}</a> ${statusBadge(last.status)}</span>
</div>`;
  }
  return html`<section class="generate-all">
  ${actionButton('Generate all', '/commands/story-backlog/generate-all', { project_id: projectId }, { disabled: !!running, primary: true })}
  ${running ? html`<span class="in-progress">Generation in progress</span>` : ''}
  ${progress}
</section>`;
}

export async function projectPage(services: Services, projectId: string): Promise<{ title: string; body: Html }> {
  const project = await services.projects.get(projectId);
  const threads = await services.threads.list({ active: false, projectId, limit: 200 });
  const active = await services.threads.list({ active: true, projectId, limit: 1000 });
  // After the threads: an epic's thread commits its stories with its end, so a backlog read after the thread
  // lists has every epic they show complete (read before them, a finish committing in between showed the
  // epic done, and the progress bar full, with no stories yet).
  const backlog = await services.projects.backlog(projectId);
  const activeFor = (epicId: string) => active.find((t) => t.target_ref.epic_id === epicId);
  const latestFor = (epicId: string) => threads.find((t) => t.target_ref.epic_id === epicId);
  const generatedOf = new Map(backlog.epics.map((e) => [e.epic_id, e]));

  const rows = project.epics.map((epic) => {
    const generated = generatedOf.get(epic.id);
    const count = generated?.stories.length ?? 0;
    const inFlight = activeFor(epic.id);
    const latest = latestFor(epic.id);
    let state: Html;
    if (inFlight)
      state = html`<span class="in-progress">Generation in progress</span> <a href="/threads/${inFlight.thread_id}">${statusBadge(inFlight.status)}</a>`;
    else if (latest && latest.status !== 'complete') state = html`<a href="/threads/${latest.thread_id}">Last generation ${statusBadge(latest.status)}</a>`;
    else if (generated?.generated_at) state = html`<span class="muted">generated ${time(generated.generated_at)}</span>`;
    else state = html`<span class="muted">no stories yet</span>`;
    const button = actionButton(
      'Generate',
      '/commands/story-backlog/generate-epic',
      { project_id: projectId, epic_id: epic.id, ...(count > 0 ? { force: true } : {}) },
      {
        disabled: !!inFlight,
        title: count > 0 ? `replace the ${count} stories (a new paid call)` : undefined,
        confirm: count > 0 ? `Replace the ${count} stories of "${epic.title}"? This is a new paid call.` : undefined,
      },
    );
    return html`<tr data-epic="${epic.id}">
  <td><code>${epic.id}</code></td>
  <td><strong>${epic.title}</strong>${
    count > 0
      ? html`<details><summary>${count} ${count === 1 ? 'story' : 'stories'}</summary><ol class="stories">${generated!.stories.map(
          (s) => html`<li><strong>${s.title}</strong><p>${s.description}</p><ul>${s.acceptance_criteria.map((c) => html`<li>${c}</li>`)}</ul></li>`,
        )}</ol></details>`
      : ''
  }</td>
  <td class="num" data-testid="story-count">${count}</td>
  <td>${state}</td>
  <td>${button}</td>
</tr>`;
  });

  const stories = html`${generateAllSection(projectId, threads)}
<table class="epics">
<thead><tr><th>Epic</th><th>Title and stories</th><th class="num">Stories</th><th>State</th><th></th></tr></thead>
<tbody>${rows}</tbody>
</table>`;
  const body = html`<p class="crumbs"><a href="/">Projects</a> /</p>
<h1>${project.name}</h1>
<p class="muted"><code>${project.project_id}</code>${
    project.epics.length > 0
      ? ` · ${project.epics.length} epics · story backlog v${backlog.version}${backlog.updated_at ? ` · updated ${time(backlog.updated_at)}` : ''}`
      : ''
  } · <a href="/threads?project_id=${encodeURIComponent(projectId)}">threads</a></p>
${project.epics.length > 0 ? stories : ''}
${await documentsSection(services, projectId)}`;
  return { title: project.name, body };
}
