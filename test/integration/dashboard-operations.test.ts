/**
 * The dashboard for any operation, in a real headless Chromium against the real daemon, its SQLite file
 * and the simulator: the example operation (examples/operations/release_notes.mjs, copied into the
 * home) is listed, run from its page with a JSON input the daemon checks (its errors shown by field,
 * nothing stored), and its document is read from the thread's target and from the project page —
 * a project with no epics, so no story view.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { Harness, waitUntil, type ThreadJson } from '../helpers/harness.js';
import { launchBrowser } from '../helpers/browser.js';
import { startHttpDaemon, type HttpDaemon } from '../helpers/http.js';
import { EXAMPLE_INPUT, installExampleOperation } from '../helpers/operations.js';

let h: Harness;
let api: HttpDaemon;
let browser: Browser;
let page: Page;
let base: string;

const INPUT = { ...EXAMPLE_INPUT, project_id: 'shop' };
const releaseCalls = () => h.sim.calls.filter((c) => c.operation === 'release_notes');
const releaseThreads = async () => (await api.request('GET', '/threads?kind=release_notes')).json as ThreadJson[];
const result = () => page.locator('form.run .form-result');

/** Waits (up to 15 s) until `fn` holds in the page — it changes by its own polling, never by a reload. */
async function until(what: string, fn: () => Promise<boolean>): Promise<void> {
  await waitUntil(async () => (await fn().catch(() => false)) || null, what, 15_000);
}

async function runWith(input: string, o: { force?: boolean } = {}): Promise<void> {
  await page.locator('#run-input').fill(input);
  if (o.force) await page.getByLabel(/Run again/).check();
  await page.getByRole('button', { name: 'Run', exact: true }).click();
}

beforeAll(async () => {
  h = await Harness.start();
  installExampleOperation(h.home);
  api = await startHttpDaemon(h);
  await h.importProject({ id: 'shop', name: 'The Shop', epics: [] });
  browser = await launchBrowser();
  page = await (await browser.newContext({ viewport: { width: 1200, height: 900 } })).newPage();
  page.setDefaultTimeout(10_000);
  base = `http://127.0.0.1:${api.port}`;
  await page.goto(`${base}/?token=${encodeURIComponent(api.token)}`);
});

afterAll(async () => {
  await browser?.close();
  await h?.cleanup();
});

describe('dashboard: any operation', () => {
  it('lists the operations; an operation page shows its input schema', async () => {
    await page.getByRole('link', { name: 'Operations', exact: true }).click();
    expect(await page.locator('h1').innerText()).toBe('Operations');
    const listed = (await api.request('GET', '/operations')).json as { name: string; description: string; source: string; model: string }[];
    expect(await page.locator('tr[data-operation]').count()).toBe(listed.length);
    const row = page.locator('tr[data-operation="release_notes"]');
    const mine = listed.find((o) => o.name === 'release_notes')!;
    for (const text of [mine.description, mine.source, mine.model]) expect(await row.innerText()).toContain(text);
    await row.getByRole('link', { name: 'release_notes' }).click();
    expect(page.url()).toBe(`${base}/operations/release_notes`);
    const schema = (await api.request('GET', '/operations/release_notes')).json.input;
    expect(JSON.parse(await page.getByTestId('input-schema').innerText())).toEqual(schema);
    // The form starts from the schema's required fields.
    expect(Object.keys(JSON.parse(await page.locator('#run-input').inputValue()))).toEqual(['project_id', 'version', 'changes']);
  });

  it('bad input: the daemon names the field under the form, the typed input stays, nothing is stored', async () => {
    await page.goto(`${base}/operations/release_notes`);
    const bad = JSON.stringify({ ...INPUT, changes: [] });
    await runWith(bad);
    await until('the error', () => result().isVisible());
    expect(await result().innerText()).toContain('invalid input for release_notes');
    expect(await result().locator('li').allInnerTexts()).toEqual(['input.changes: must NOT have fewer than 1 items']);
    await runWith('{"project_id": "shop",');
    await until('the JSON error', async () => (await result().innerText()).includes('The input is not JSON'));
    // The page is not refreshed under the form: what was typed is still there after a polling period.
    await page.waitForTimeout(2000);
    expect(await page.locator('#run-input').inputValue()).toBe('{"project_id": "shop",');
    expect(page.url()).toBe(`${base}/operations/release_notes`);
    expect(await releaseThreads()).toEqual([]);
    expect(releaseCalls()).toHaveLength(0);
  });

  it('runs the example operation from its page → its thread → its document; the same input again is deduplicated', async () => {
    h.setFaults([{ kind: 'hang', match: 'Release 1.2.0', hang_ms: 4000 }]);
    await page.goto(`${base}/operations/release_notes?project_id=shop`);
    expect(JSON.parse(await page.locator('#run-input').inputValue()).project_id).toBe('shop');
    await runWith(JSON.stringify(INPUT));
    await page.waitForURL(/\/threads\//);
    const [thread] = await releaseThreads();
    expect(page.url()).toBe(`${base}/threads/${thread!.thread_id}`);
    await waitUntil(() => releaseCalls().length === 1, 'the call to reach the simulator');
    await page.getByRole('link', { name: 'shop · release_notes · 1.2.0' }).click();
    expect(page.url()).toBe(`${base}/projects/shop/documents/release_notes?key=1.2.0`);
    // While the call is in flight the page says which thread is writing the document; then it shows it.
    const state = await page.getByTestId('document-state').innerText();
    const content = await page.getByTestId('document-content').innerText();
    expect(releaseCalls()[0]!.status).toBeNull(); // still in flight after the page was read
    expect(state).toContain('Being written by thread');
    expect(content).toContain('Not written yet');
    await until('the document', async () => (await page.getByTestId('document-version').count()) === 1);
    expect(await page.getByTestId('document-state').count()).toBe(0);
    const doc = (await api.request('GET', '/projects/shop/documents/release_notes?key=1.2.0')).json;
    expect(JSON.parse(await page.getByTestId('document-content').innerText())).toEqual(doc.content);
    expect(await page.getByTestId('document-version').innerText()).toBe('1');
    expect(await page.locator('h1').innerText()).toBe('release_notes 1.2.0');
    expect(await page.locator('table.threads').innerText()).toContain('complete');
    expect(releaseCalls()).toHaveLength(1);

    await page.goto(`${base}/operations/release_notes`);
    await runWith(JSON.stringify(INPUT));
    await until('the notice', () => result().isVisible());
    expect(await result().innerText()).toContain('An identical request is already complete');
    expect(await result().getByRole('link', { name: 'Open its thread' }).getAttribute('href')).toBe(`/threads/${thread!.thread_id}`);
    expect(await releaseThreads()).toHaveLength(1);
    expect(releaseCalls()).toHaveLength(1);

    // "Run again" pays for a new run: version 2 of the same document.
    await runWith(JSON.stringify(INPUT), { force: true });
    await page.waitForURL((url) => url.pathname.startsWith('/threads/') && !url.pathname.endsWith(thread!.thread_id));
    await until('the second run', async () => (await page.locator('h1 .badge').innerText()) === 'complete');
    expect(releaseCalls()).toHaveLength(2);
    h.setFaults([]);
  });

  it("the project page (a project with no epics: no story view) lists its documents, each linking to the document's page", async () => {
    await page.goto(`${base}/projects/shop`);
    expect(await page.locator('h1').innerText()).toBe('The Shop');
    expect(await page.locator('table.epics').count()).toBe(0);
    expect(await page.getByRole('button', { name: 'Generate all' }).count()).toBe(0);
    const row = page.locator('tr[data-doc="release_notes/1.2.0"]');
    expect(await row.innerText()).toContain('2'); // the version
    await row.getByRole('link', { name: 'release_notes' }).click();
    expect(page.url()).toBe(`${base}/projects/shop/documents/release_notes?key=1.2.0`);
    expect(await page.getByTestId('document-version').innerText()).toBe('2');
    expect(await page.locator('table.threads tbody tr').count()).toBe(2);
    // A document nothing has written or is writing: the same 404 as the API.
    await page.goto(`${base}/projects/shop/documents/release_notes?key=9.9.9`);
    expect(await page.locator('h1').innerText()).toContain('404');
  });
});
