/**
 * The dashboard's only client code (bundled into dist/web/dashboard.js). Three jobs:
 * - refresh: every 1.5 s (while the tab is visible) fetch this page again and swap in its live part
 *   (`data-live`), so state shown is always the server's — derived from threads and documents;
 * - commands: a button with `data-post` sends its `data-body` as a JSON POST, disables itself at once
 *   (a double click sends one request; the daemon's idempotency covers the rest) and refreshes;
 * - running an operation: a form with `data-run` sends its JSON input to that URL; the daemon checks
 *   it, and the fields it names are shown under the form. A new run opens its thread's page.
 */

const POLL_MS = 1500;
let timer: number | undefined;
let stopped = false;

function flash(message: string | null): void {
  const el = document.getElementById('flash');
  if (!el) return;
  el.textContent = message ?? '';
  el.hidden = message === null;
}

/** `<details>` the user opened stay open across a refresh (keyed by their row and position). */
function openDetails(root: Element): Set<string> {
  const keys = new Set<string>();
  root.querySelectorAll('details').forEach((d, i) => {
    if (d.open) keys.add(detailsKey(d, i));
  });
  return keys;
}

function detailsKey(d: Element, i: number): string {
  const row = d.closest('[data-epic],[data-seq]');
  return row ? `${row.getAttribute('data-epic') ?? ''}#${row.getAttribute('data-seq') ?? ''}` : `@${i}`;
}

async function refresh(): Promise<void> {
  const live = document.getElementById('live');
  if (!live || stopped || !live.hasAttribute('data-live')) return;
  // Do not pull a form out from under someone typing in it.
  if (document.activeElement && live.contains(document.activeElement) && /^(INPUT|SELECT|TEXTAREA)$/.test(document.activeElement.tagName)) return;
  const res = await fetch(location.href, { headers: { accept: 'text/html' }, credentials: 'same-origin' });
  if (res.status === 401) {
    stopped = true;
    flash('Signed out: open the link `combine ui` prints to sign in again.');
    return;
  }
  const next = new DOMParser().parseFromString(await res.text(), 'text/html');
  const fresh = next.getElementById('live');
  if (!fresh || fresh.innerHTML === live.innerHTML) return;
  const open = openDetails(live);
  live.innerHTML = fresh.innerHTML;
  live.querySelectorAll('details').forEach((d, i) => {
    if (open.has(detailsKey(d, i))) d.open = true;
  });
  document.title = next.title;
}

function schedule(delay = POLL_MS): void {
  window.clearTimeout(timer);
  timer = window.setTimeout(async () => {
    try {
      if (document.visibilityState === 'visible') await refresh();
    } catch {
      // The daemon restarting or briefly unreachable: try again at the next tick.
    }
    if (!stopped) schedule();
  }, delay);
}

async function post(button: HTMLButtonElement): Promise<void> {
  const url = button.dataset.post!;
  const confirmText = button.dataset.confirm;
  if (confirmText && !window.confirm(confirmText)) return;
  button.disabled = true;
  try {
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: button.dataset.body ?? '{}',
      credentials: 'same-origin',
    });
    if (!res.ok) {
      const problem = (await res.json().catch(() => null)) as { detail?: string } | null;
      flash(problem?.detail ?? `${res.status} ${res.statusText}`);
    } else flash(null);
  } catch (err) {
    flash(`the daemon did not answer: ${(err as Error).message}`);
  }
  schedule(0);
}

type Problem = { detail?: string; errors?: { field: string; message: string }[] };

/** Shows `message` (and a list of lines, or a link) in the form's result box; null hides it. */
function result(form: HTMLFormElement, message: string | null, lines: string[] = [], link?: { href: string; text: string }): void {
  const box = form.querySelector<HTMLElement>('.form-result');
  if (!box) return;
  box.replaceChildren();
  box.hidden = message === null;
  box.dataset.kind = link ? 'notice' : 'problem';
  if (message === null) return;
  const p = document.createElement('p');
  p.textContent = message;
  if (link) {
    const a = document.createElement('a');
    a.href = link.href;
    a.textContent = link.text;
    p.append(' ', a);
  }
  box.append(p);
  if (lines.length > 0) {
    const ul = document.createElement('ul');
    for (const line of lines) ul.append(Object.assign(document.createElement('li'), { textContent: line }));
    box.append(ul);
  }
}

async function run(form: HTMLFormElement): Promise<void> {
  const text = form.querySelector('textarea')?.value ?? '';
  let input: unknown;
  try {
    input = JSON.parse(text);
  } catch (err) {
    result(form, `The input is not JSON: ${(err as Error).message}`);
    return;
  }
  const force = form.querySelector<HTMLInputElement>('input[name="force"]')?.checked ?? false;
  const button = form.querySelector<HTMLButtonElement>('button[type="submit"]');
  if (button) button.disabled = true;
  try {
    const res = await fetch(form.dataset.run!, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify({ input, force }),
      credentials: 'same-origin',
    });
    const body = (await res.json().catch(() => null)) as (Problem & { thread_id?: string; status?: string; deduplicated?: boolean }) | null;
    if (res.ok && body?.thread_id) {
      const thread = `/threads/${encodeURIComponent(body.thread_id)}`;
      if (!body.deduplicated) return location.assign(thread);
      const again = body.status === 'complete' ? ' Tick "Run again" to pay for a new run.' : '';
      result(form, `An identical request is already ${body.status}: nothing new was started.${again}`, [], { href: thread, text: 'Open its thread' });
    } else {
      const [first, ...rest] = (body?.detail ?? `${res.status} ${res.statusText}`).split('\n');
      result(form, first!, body?.errors?.map((e) => `${e.field}: ${e.message}`) ?? rest.map((l) => l.trim()));
    }
  } catch (err) {
    result(form, `the daemon did not answer: ${(err as Error).message}`);
  } finally {
    if (button) button.disabled = false;
  }
}

document.addEventListener('submit', (e) => {
  const form = e.target;
  if (!(form instanceof HTMLFormElement) || form.dataset.run === undefined) return;
  e.preventDefault();
  void run(form);
});
document.addEventListener('click', (e) => {
  const button = (e.target as Element | null)?.closest('button[data-post]');
  if (!(button instanceof HTMLButtonElement) || button.disabled) return;
  e.preventDefault();
  void post(button);
});
document.addEventListener('visibilitychange', () => {
  if (document.visibilityState === 'visible') schedule(0);
});
schedule();
