/**
 * The dashboard: server-rendered pages, one per resource of the JSON API (a browser asking for HTML at
 * `/threads/{id}` gets the thread's page, any other client its JSON), plus a few kB of client script
 * (client/dashboard.ts, bundled into dist/web by `npm run build`) that refreshes the page's live part
 * every 1.5 s and sends the buttons' commands. No CDN: everything is served from this port.
 */
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { VERSION } from '../core/version.js';
import type { Services } from '../daemon/services/index.js';
import type { Dashboard } from '../daemon/http/server.js';
import type { Problem } from '../daemon/http/problem.js';
import { compilePath, parseWith } from '../daemon/http/routes.js';
import { documentQuery, threadsQuery } from '../daemon/http/schemas.js';
import { html, layout, type Html } from './html.js';
import { healthPage, schedulesPage } from './pages/daemon.js';
import { documentPage } from './pages/documents.js';
import { operationPage, operationsPage } from './pages/operations.js';
import { projectPage, projectsPage } from './pages/projects.js';
import { threadPage, threadsPage } from './pages/threads.js';
import { usagePage } from './pages/usage.js';

type Page = { title: string; body: Html; live?: boolean };
type Render = (services: Services, params: Record<string, string>, query: URLSearchParams) => Page | Promise<Page>;

/** An empty form field means "any": dropped before the query is validated. */
function filled(q: URLSearchParams): Record<string, string> {
  return Object.fromEntries([...q].filter(([, v]) => v !== ''));
}

const PAGES: { path: string; section: string; render: Render }[] = [
  { path: '/', section: 'Projects', render: (services) => projectsPage(services) },
  { path: '/projects', section: 'Projects', render: (services) => projectsPage(services) },
  { path: '/projects/{project_id}', section: 'Projects', render: (services, p) => projectPage(services, p.project_id!) },
  {
    path: '/projects/{project_id}/documents/{doc_type}',
    section: 'Projects',
    render: (services, p, q) => documentPage(services, p.project_id!, p.doc_type!, parseWith('query', documentQuery, filled(q)).key ?? null),
  },
  { path: '/operations', section: 'Operations', render: (services, _p, q) => operationsPage(services, q) },
  { path: '/operations/{operation}', section: 'Operations', render: (services, p, q) => operationPage(services, p.operation!, q) },
  { path: '/threads', section: 'Threads', render: (services, _p, q) => threadsPage(services, parseWith('query', threadsQuery, filled(q))) },
  { path: '/threads/{thread_id}', section: 'Threads', render: (services, p) => threadPage(services, p.thread_id!) },
  { path: '/usage', section: 'Usage', render: (services) => usagePage(services) },
  { path: '/schedules', section: 'Schedules', render: (services) => schedulesPage(services) },
  { path: '/health', section: 'Health', render: (services) => healthPage(services) },
];
const compiled = PAGES.map((p) => ({ ...p, match: compilePath(p.path) }));

const ASSET_TYPES: Record<string, string> = { 'dashboard.js': 'text/javascript; charset=utf-8', 'dashboard.css': 'text/css; charset=utf-8' };

/** dist/web next to the daemon bundle (dist/daemon.js), or from the source tree (tests, benchmarks). */
function assetsDir(): string | null {
  for (const rel of ['./web/', '../../dist/web/']) {
    const dir = fileURLToPath(new URL(rel, import.meta.url));
    if (existsSync(`${dir}dashboard.js`)) return dir;
  }
  return null;
}

export function createDashboard(): Dashboard {
  const dir = assetsDir();
  const cache = new Map<string, Buffer>();
  return {
    async page(path, query, services) {
      for (const p of compiled) {
        const params = p.match(path);
        if (!params) continue;
        const { title, body, live } = await p.render(services, params, query);
        return layout({ title, section: p.section, body, version: VERSION, live });
      }
      return null;
    },
    errorPage(problem: Problem) {
      const hint =
        problem.status === 401
          ? html`<p>Open the dashboard with the link <code>combine ui</code> prints: it carries the token once and leaves a cookie in this browser.</p>`
          : html`<p><a href="/">Back to the projects</a></p>`;
      return layout({
        title: problem.title,
        section: '',
        body: html`<h1>${problem.status} ${problem.title}</h1><p class="error">${problem.detail}</p>${hint}`,
        version: VERSION,
      });
    },
    asset(name) {
      const type = ASSET_TYPES[name];
      if (!type || !dir) return null;
      let body = cache.get(name);
      if (!body) cache.set(name, (body = readFileSync(`${dir}${name}`)));
      return { type, body };
    },
  };
}
