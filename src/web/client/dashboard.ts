/**
 * The dashboard's only client code (bundled into dist/web/dashboard.js). Two jobs:
 * - refresh: every 1.5 s (while the tab is visible) fetch this page again and swap in its live part,
 *   so state shown is always the server's — derived from threads and documents, never kept here;
 * - commands: a button with `data-post` sends its `data-body` as a JSON POST, disables itself at once
 *   (a double click sends one request; the daemon's idempotency covers the rest) and refreshes.
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
  if (!live || stopped) return;
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
