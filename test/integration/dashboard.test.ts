/**
 * The dashboard in a real headless Chromium (from the npm registry) against the real daemon, its
 * SQLite file and the simulator — the requirements' UI acceptance criteria (ADR-035 §11, WS-ADR-035
 * "UI Updates"): click Generate, navigate away, come back → stories; a double click → one thread and
 * one paid call; a reload while the call is in flight → `Generation in progress` and a disabled button.
 * One browser for the whole file.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, BrowserContext, Locator, Page } from 'playwright-core';
import { Harness, project, waitUntil, type ThreadJson } from '../helpers/harness.js';
import { launchBrowser } from '../helpers/browser.js';
import { startHttpDaemon, type HttpDaemon } from '../helpers/http.js';

let h: Harness;
let api: HttpDaemon;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let base: string;
/** How many epics had no stories when `Generate all` was clicked: its children. */
let missingBeforeGenerateAll = 0;

const row = (epic: string): Locator => page.locator(`tr[data-epic="${epic}"]`);
const generateButton = (epic: string): Locator => row(epic).getByRole('button', { name: 'Generate', exact: true });
const storyCount = async (epic: string) => Number(await row(epic).getByTestId('story-count').innerText());

async function threadsOf(epic: string): Promise<ThreadJson[]> {
  const all = (await api.request('GET', '/threads?project_id=acme&limit=1000')).json as ThreadJson[];
  return all.filter((t) => t.target_ref.epic_id === epic);
}

async function ended(threadId: string): Promise<ThreadJson> {
  return waitUntil(async () => {
    const t = (await api.request('GET', `/threads/${threadId}`)).json as ThreadJson;
    return ['complete', 'failed', 'canceled'].includes(t.status) ? t : null;
  }, `thread ${threadId} to end`);
}

/** Waits (up to 15 s) until `fn` holds in the page — the page changes by its own polling, never by a reload. */
async function until(what: string, fn: () => Promise<boolean>): Promise<void> {
  await waitUntil(async () => (await fn().catch(() => false)) || null, what, 15_000);
}

beforeAll(async () => {
  h = await Harness.start();
  h.writeConfig({ prices: { 'test-model': { input_per_million_usd: 150, output_per_million_usd: 600 } } });
  api = await startHttpDaemon(h);
  await h.importProject(project('acme', 6));
  browser = await launchBrowser();
  context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
  page = await context.newPage();
  page.setDefaultTimeout(10_000);
  base = `http://127.0.0.1:${api.port}`;
  await page.goto(`${base}/?token=${encodeURIComponent(api.token)}`); // signed in, as `combine ui`'s link does
});

afterAll(async () => {
  await browser?.close();
  await h?.cleanup();
});

describe('dashboard in a real browser', () => {
  it('opens with the link `combine ui` prints: the token becomes an HttpOnly SameSite=Strict cookie and leaves the address bar', async () => {
    const fresh = await browser.newContext();
    try {
      const p = await fresh.newPage();
      await p.goto(`${base}/projects/acme`);
      expect(await p.locator('h1').innerText()).toContain('401');
      expect(await p.locator('main').innerText()).toContain('combine ui');
      const ui = await h.json<{ url: string; port: number }>(['ui']);
      expect(ui.port).toBe(api.port);
      expect(ui.url).toBe(`${base}/?token=${encodeURIComponent(api.token)}`);
      await p.goto(ui.url);
      expect(p.url()).toBe(`${base}/`);
      const cookie = (await fresh.cookies()).find((c) => c.name === 'combine_token');
      expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Strict' });
      expect(await p.evaluate(() => (globalThis as unknown as { document: { cookie: string } }).document.cookie)).toBe(''); // page scripts cannot read it
      await p.getByRole('link', { name: 'Project acme' }).click();
      expect(p.url()).toBe(`${base}/projects/acme`);
      expect(await p.locator('tr[data-epic]').count()).toBe(6);
    } finally {
      await fresh.close();
    }
  });

  it('click Generate, navigate to another page, come back → the epic’s stories are shown', async () => {
    h.setFaults([{ kind: 'hang', match: 'Epic id: E1', hang_ms: 1200 }]);
    await page.goto(`${base}/projects/acme`);
    expect(await storyCount('E1')).toBe(0);
    await generateButton('E1').click();
    await until('E1 in progress', async () => (await row('E1').innerText()).includes('Generation in progress'));
    await page.getByRole('link', { name: 'Threads', exact: true }).click();
    expect(await page.locator('h1').innerText()).toBe('Threads');
    const [thread] = await threadsOf('E1');
    expect((await ended(thread!.thread_id)).status).toBe('complete'); // it finished while we were elsewhere
    await page.getByRole('link', { name: 'Projects', exact: true }).click();
    await page.getByRole('link', { name: 'Project acme' }).click();
    const stories = (await h.json<{ epics: { epic_id: string; stories: { title: string }[] }[] }>(['backlog', 'acme'])).epics.find(
      (e) => e.epic_id === 'E1',
    )!.stories;
    expect(stories.length).toBeGreaterThan(0);
    expect(await storyCount('E1')).toBe(stories.length);
    await row('E1').locator('summary').click();
    for (const s of stories) expect(await row('E1').innerText()).toContain(s.title);
    expect(await generateButton('E1').isEnabled()).toBe(true);
    h.setFaults([]);
  });

  it('double-click Generate → one thread, and the simulator received one call', async () => {
    await page.goto(`${base}/projects/acme`);
    await generateButton('E2').dblclick();
    await until('E2 generated', async () => (await storyCount('E2')) > 0);
    const threads = await threadsOf('E2');
    expect(threads).toHaveLength(1);
    expect(threads[0]!.status).toBe('complete');
    expect(h.sim.calls.filter((c) => c.epic_id === 'E2')).toHaveLength(1);
  });

  it('reload while the call is in flight (a slow simulator) → `Generation in progress` and a disabled button', async () => {
    h.setFaults([{ kind: 'hang', match: 'Epic id: E3', hang_ms: 4000 }]);
    await page.goto(`${base}/projects/acme`);
    await generateButton('E3').click();
    await waitUntil(() => h.sim.calls.some((c) => c.epic_id === 'E3'), 'the E3 call to reach the simulator');
    await page.reload();
    // Read at once after the reload: the state is in the server's page, derived from the thread.
    expect(await row('E3').innerText()).toContain('Generation in progress');
    expect(await generateButton('E3').isDisabled()).toBe(true);
    expect(h.sim.calls.find((c) => c.epic_id === 'E3')!.status).toBeNull(); // still in flight
    // When the call returns, the page (polling) shows the stories and the button comes back.
    await until('E3 stories', async () => (await storyCount('E3')) > 0);
    expect(await generateButton('E3').isEnabled()).toBe(true);
    expect(await row('E3').innerText()).not.toContain('Generation in progress');
    h.setFaults([]);
  });

  it('Generate all shows a progress bar of its children until every epic has stories', async () => {
    h.setFaults([{ kind: 'hang', match: 'Epic id: E6', hang_ms: 1500 }]);
    await page.goto(`${base}/projects/acme`);
    // Epics generated above are not paid for again: the orchestration has a child for each of the others.
    const epics = ['E1', 'E2', 'E3', 'E4', 'E5', 'E6'];
    missingBeforeGenerateAll = 0;
    for (const epic of epics) if ((await storyCount(epic)) === 0) missingBeforeGenerateAll++;
    expect(missingBeforeGenerateAll).toBeGreaterThan(0);
    await page.getByRole('button', { name: 'Generate all' }).click();
    const bar = page.getByRole('progressbar', { name: 'Generate all progress' });
    await until('the progress bar', () => bar.isVisible());
    expect(await page.getByRole('button', { name: 'Generate all' }).isDisabled()).toBe(true);
    const n = missingBeforeGenerateAll;
    await until('all epics done', async () => (await page.locator('.progress').innerText()).includes(`${n} of ${n} epics done`));
    expect(await bar.getAttribute('value')).toBe(String(n));
    for (const epic of epics) expect(await storyCount(epic)).toBeGreaterThan(0);
    // The orchestration closes once its last child has ended, which can be a poll after the page counted that child
    // done (on Postgres the parent's end may be its own transaction): the button comes back then.
    await until('the Generate all button enabled again', () => page.getByRole('button', { name: 'Generate all' }).isEnabled());
    h.setFaults([]);
  });

  it("a thread's page shows its ledger as a timeline (tokens, cost, hashes); Retry and Cancel work from it", async () => {
    h.setFaults([{ kind: 'auth', match: 'Epic id: E4', times: 1 }]);
    const failed = (await api.request('POST', '/commands/story-backlog/generate-epic', { body: { project_id: 'acme', epic_id: 'E4', force: true } })).json
      .thread_id as string;
    expect((await ended(failed)).status).toBe('failed');
    await page.goto(`${base}/threads/${failed}`);
    expect(await page.locator('.timeline .entry-error').count()).toBe(1);
    expect(await page.getByRole('button', { name: 'Cancel' }).isDisabled()).toBe(true);
    await page.getByRole('button', { name: 'Retry' }).click();
    await until('the retry to complete', async () => (await page.locator('h1 .badge').innerText()) === 'complete');
    await until('the response entry', async () => (await page.locator('.timeline .entry-mutation_report').count()) === 1);
    const ledger = (await api.request('GET', `/threads/${failed}/ledger`)).json as {
      seq: number;
      hash: string;
      entry_type: string;
      cost_usd?: number;
      payload: any;
    }[];
    const shown = await page
      .locator('.timeline .entry')
      .evaluateAll((els) => els.map((e) => ({ seq: e.getAttribute('data-seq'), hash: e.querySelector('.hash code')!.textContent })));
    expect(shown).toEqual(ledger.map((e) => ({ seq: String(e.seq), hash: e.hash })));
    const response = ledger.find((e) => e.entry_type === 'response')!;
    expect(response.cost_usd).toBeGreaterThan(0);
    const costLine = await page.locator(`.entry[data-seq="${response.seq}"] .cost`).innerText();
    expect(costLine).toContain(`${response.payload.usage.total_tokens} tokens`);
    expect(costLine).toContain(`$${response.cost_usd!.toFixed(4)}`);

    h.setFaults([{ kind: 'hang', match: 'Epic id: E5' }]);
    const hanging = (await api.request('POST', '/commands/story-backlog/generate-epic', { body: { project_id: 'acme', epic_id: 'E5', force: true } })).json
      .thread_id as string;
    await waitUntil(() => h.sim.calls.some((c) => c.epic_id === 'E5' && c.fault === 'hang'), 'the E5 call in flight');
    await page.goto(`${base}/threads/${hanging}`);
    expect(await page.getByRole('button', { name: 'Retry' }).isDisabled()).toBe(true);
    await page.getByRole('button', { name: 'Cancel' }).click();
    await until('canceled', async () => (await page.locator('h1 .badge').innerText()) === 'canceled');
    expect((await api.request('GET', `/threads/${hanging}`)).json.status).toBe('canceled');
    h.setFaults([]);
  });

  it('the threads list filters by status, kind and project', async () => {
    await page.goto(`${base}/threads`);
    await page.selectOption('select[name="status"]', 'canceled');
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForURL(/status=canceled/);
    const statuses = await page.locator('table.threads tbody .badge').allInnerTexts();
    expect(statuses).toEqual(['canceled']);
    await page.goto(`${base}/threads?kind=story_generate_all&project_id=acme`);
    expect(await page.locator('table.threads tbody tr').count()).toBe(1);
    expect(await page.locator('table.threads tbody').innerText()).toContain(`${missingBeforeGenerateAll} complete`);
    await page.goto(`${base}/threads?status=bogus`);
    expect(await page.locator('h1').innerText()).toContain('400');
    expect(await page.locator('main').innerText()).toContain('status');
  });

  it('usage draws cost per project per day; schedules and health (with the breakers) render', async () => {
    await page.goto(`${base}/usage`);
    const bars = page.locator('figure.chart svg rect[class^="series-"]');
    expect(await bars.count()).toBeGreaterThanOrEqual(1);
    const usage = (await api.request('GET', '/usage')).json as { rows: { project_id: string; day: string; cost_usd: number }[] };
    expect(usage.rows[0]!.cost_usd).toBeGreaterThan(0);
    expect(await bars.first().locator('title').textContent()).toBe(`acme ${usage.rows[0]!.day}: $${usage.rows[0]!.cost_usd.toFixed(4)}`);
    await page.goto(`${base}/schedules`);
    expect(await page.locator('h1').innerText()).toBe('Schedules');
    await page.goto(`${base}/health`);
    expect(await page.locator('h1').innerText()).toContain('ready');
    expect(await page.locator('main').innerText()).toContain(h.sim.url);
  });

  it('shows names as text, never as markup (a hostile project name runs no script)', async () => {
    const hostile = '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>';
    await h.importProject({ id: 'evil', name: hostile, epics: [{ id: 'E1', title: `${hostile} epic`, description: 'x' }] });
    await page.goto(`${base}/projects/evil`);
    expect(await page.locator('h1').innerText()).toBe(hostile);
    expect(await row('E1').innerText()).toContain(`${hostile} epic`);
    await page.goto(`${base}/`);
    expect(await page.getByRole('link', { name: hostile }).count()).toBe(1);
    expect(await page.evaluate(() => (globalThis as { __xss?: number }).__xss)).toBeUndefined();
  });
});
