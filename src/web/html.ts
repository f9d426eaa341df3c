/**
 * Server-side HTML: a tagged template that escapes every interpolated value unless it is already
 * `Html`, so a project name or a model's answer can never become markup. The layout every page shares.
 */

export class Html {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

type Value = Html | string | number | boolean | null | undefined | readonly Value[];

export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

function render(v: Value): string {
  if (v === null || v === undefined || v === false) return '';
  if (v instanceof Html) return v.text;
  if (Array.isArray(v)) return v.map(render).join('');
  return escapeHtml(String(v));
}

export function html(strings: TemplateStringsArray, ...values: Value[]): Html {
  let out = strings[0]!;
  values.forEach((v, i) => {
    out += render(v) + strings[i + 1]!;
  });
  return new Html(out);
}

/** "2026-11-22T10:00:00.000Z" → "2026-11-22 10:00:00". */
export function time(iso: string | null | undefined): string {
  return iso ? iso.replace('T', ' ').slice(0, 19) : '–';
}

export function usd(n: number | null | undefined): string {
  if (n === null || n === undefined) return '–';
  return `$${n.toFixed(n !== 0 && Math.abs(n) < 0.01 ? 6 : 4)}`;
}

/** The same short id the CLI shows and accepts (domain/short-id.ts): from the tail, not the timestamp head. */
export { shortId } from '../domain/short-id.js';

export function statusBadge(status: string): Html {
  return html`<span class="badge badge-${status}">${status}</span>`;
}

/** A button the client script turns into a JSON POST (`data-post`, `data-body`); `disabled` is rendered by the server. */
export function actionButton(
  label: string,
  post: string,
  body: unknown,
  o: { disabled?: boolean; title?: string; primary?: boolean; confirm?: string } = {},
): Html {
  return html`<button type="button" class="${o.primary ? 'primary' : ''}" data-post="${post}" data-body="${JSON.stringify(body)}"${
    o.disabled ? new Html(' disabled') : ''
  }${o.title ? html` title="${o.title}"` : ''}${o.confirm ? html` data-confirm="${o.confirm}"` : ''}>${label}</button>`;
}

const NAV = [
  ['/', 'Projects'],
  ['/operations', 'Operations'],
  ['/threads', 'Threads'],
  ['/usage', 'Usage'],
  ['/schedules', 'Schedules'],
  ['/health', 'Health'],
] as const;

/** The page of a project's document (a thread's target, a row of the project's documents). */
export function documentHref(d: { project_id: string; doc_type: string; key?: string | null }): string {
  const path = `/projects/${encodeURIComponent(d.project_id)}/documents/${encodeURIComponent(d.doc_type)}`;
  return d.key ? `${path}?key=${encodeURIComponent(d.key)}` : path;
}

/** JSON shown to a person: pretty, and cut at `max` characters with a pointer to the JSON API. */
export function prettyJson(v: unknown, max: number, whole: string): string {
  const text = typeof v === 'string' ? v : JSON.stringify(v, null, 2);
  return text.length > max ? `${text.slice(0, max)}\n… (${text.length - max} more characters: ${whole} has all)` : text;
}

/** `live: false`: the page is not refreshed (it holds a form whose typing a refresh would lose). */
export function layout(o: { title: string; section: string; body: Html; version: string; live?: boolean }): string {
  return `<!doctype html>${
    html`<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${o.title} · combine</title>
<link rel="stylesheet" href="/assets/dashboard.css">
<script src="/assets/dashboard.js" defer></script>
</head>
<body>
<header class="top">
  <a class="brand" href="/">combine</a>
  <nav aria-label="Sections">${NAV.map(([href, label]) => html`<a href="${href}"${label === o.section ? new Html(' aria-current="page"') : ''}>${label}</a>`)}</nav>
</header>
<div id="flash" role="alert" hidden></div>
<main id="live"${o.live === false ? '' : new Html(' data-live')}>
${o.body}
</main>
<footer>combine ${o.version} · state from threads and documents, refreshed every 1.5 s · <a href="/openapi.json">API</a></footer>
</body>
</html>`.text
  }`;
}
