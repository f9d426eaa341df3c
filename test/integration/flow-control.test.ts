/**
 * Flow control against the real daemon and simulator: a 429 parks the model for every queued item,
 * backpressure refuses a command whole, and the fair scheduler lets another project's work through.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { FAST_RETRY, Harness, project, TEST_BACKEND, waitUntil, type CommandJson } from '../helpers/harness.js';

let h: Harness;
afterEach(() => h?.cleanup());

async function queuedCount(): Promise<number> {
  return (await h.queryOne<{ n: number }>("SELECT count(*) AS n FROM llm_work_items WHERE status = 'queued'"))!.n;
}

describe('rate limits', () => {
  it('a 429 from one call holds back every queued call of that model until the reset, burning no one else’s attempt', async () => {
    h = await Harness.start();
    h.writeConfig({ ...FAST_RETRY, engine: { max_in_flight: 1 } });
    await h.importProject(project('p', 4));
    // The first call gets a 429 whose x-ratelimit-reset-requests says the window reopens in 2 s (no Retry-After).
    h.setFaults([{ kind: 'rate_limit', times: 1, reset_requests: '2s' }]);
    const r = await h.json<CommandJson>(['generate-all', '--project', 'p']);
    const final = await h.waitForEnd(r.thread_id);
    expect(final.status).toBe('complete');

    const [first, ...rest] = h.sim.calls;
    expect(first!.status).toBe(429);
    expect(rest).toHaveLength(4); // three other epics + the retry of the limited one
    // With a free slot and three other items due, nothing started before the reset.
    for (const c of rest) expect(c.at - first!.at).toBeGreaterThanOrEqual(2000);
    expect(new Set(rest.map((c) => c.epic_id)).size).toBe(4);

    const items = await h.query<{ attempt: number }>('SELECT attempt FROM llm_work_items ORDER BY attempt DESC');
    // Only the item that got the 429 used a second attempt; the others were held back, not failed.
    expect(items.map((i) => i.attempt)).toEqual([2, 1, 1, 1]);
    expect(h.logText()).toContain('rate limited by the provider (429)');
  });

  it('the provider’s x-ratelimit-remaining-requests: 0 holds the next call until x-ratelimit-reset-requests', async () => {
    h = await Harness.start({ rateLimitHeaders: { 'remaining-requests': '0', 'reset-requests': '1500ms' } });
    h.writeConfig({ ...FAST_RETRY, engine: { max_in_flight: 1 } });
    await h.importProject(project('p', 2));
    const r = await h.json<CommandJson>(['generate-all', '--project', 'p']);
    expect((await h.waitForEnd(r.thread_id)).status).toBe('complete');
    const [first, second] = h.sim.calls;
    expect(h.sim.calls.every((c) => c.status === 200)).toBe(true);
    expect(second!.at - first!.at).toBeGreaterThanOrEqual(1500);
  });
});

describe('backpressure', () => {
  it('refuses the 10,001st queued item with QUEUE_FULL (exit 1) and stores nothing of the command', async () => {
    h = await Harness.start();
    // A budget smaller than one call keeps all 10,000 items queued (parked), with no call made.
    h.writeConfig({ budgets: { projects: { big: { total_tokens: 1 } } } });
    await h.importProject(project('big', 10_000));
    await h.importProject(project('other', 3));
    const all = await h.cli(['generate-all', '--project', 'big', '--json'], { timeoutMs: 60_000 });
    expect(all.code, all.stderr).toBe(0);
    expect(await queuedCount()).toBe(10_000);

    const snapshot = () =>
      h.queryOne(
        'SELECT (SELECT count(*) FROM llm_threads) AS threads, (SELECT count(*) FROM llm_work_items) AS items, (SELECT count(*) FROM llm_ledger_entries) AS entries',
      );
    const before = await snapshot();
    const one = await h.cli(['generate-epic', '--project', 'other', '--epic', 'E1', '--json']);
    expect(one.code).toBe(1);
    expect(one.stderr).toContain('QUEUE_FULL');
    expect(one.stderr).toContain('10000');
    // A generate-all is refused as a whole: no parent, no child.
    const many = await h.cli(['generate-all', '--project', 'other', '--json']);
    expect(many.code).toBe(1);
    expect(many.stderr).toContain('QUEUE_FULL');
    expect(await snapshot()).toEqual(before);
    expect(await h.json(['threads', '--project', 'other'])).toEqual([]);
    expect(h.sim.calls).toHaveLength(0);

    // Room again once the queue drains: the same request is accepted.
    await h.json(['cancel', JSON.parse(all.stdout).thread_id]);
    expect(await queuedCount()).toBe(0);
    const again = await h.json<CommandJson>(['generate-epic', '--project', 'other', '--epic', 'E1']);
    expect((await h.waitForEnd(again.thread_id)).status).toBe('complete');
  }, 120_000);
});

describe('fair scheduling', () => {
  async function startedBetween(projectId: string, from: number, to: number): Promise<number> {
    const row = await h.queryOne<{ n: number }>('SELECT count(*) AS n FROM llm_work_items WHERE project_id = ? AND started_at > ? AND started_at < ?', [
      projectId,
      from,
      to,
    ]);
    return row!.n;
  }

  async function itemOf(threadId: string): Promise<{ created_at: number; started_at: number }> {
    return (await h.queryOne<{ created_at: number; started_at: number }>('SELECT created_at, started_at FROM llm_work_items WHERE thread_id = ?', [threadId]))!;
  }

  it('with 500 generate-all children queued for project A, a generate-epic for project B takes the next free slot', async () => {
    h = await Harness.start({ latencyMs: 150 });
    h.writeConfig({ engine: { max_in_flight: 2 } });
    await h.importProject(project('A', 500));
    await h.importProject(project('B', 1));
    await h.json<CommandJson>(['generate-all', '--project', 'A']);
    await waitUntil(() => h.sim.calls.length >= 4, 'project A to be under way');
    const b = await h.json<CommandJson>(['generate-epic', '--project', 'B', '--epic', 'E1']);
    expect((await h.waitForEnd(b.thread_id)).status).toBe('complete');
    const item = await itemOf(b.thread_id);
    // No A child was claimed between B's enqueue and B's claim. On SQLite transactions run one after
    // another, so every claim round stamped after B's created_at saw B. On Postgres they overlap: B's
    // created_at is taken when its transaction begins, and the one claim round already running (a daemon
    // runs one at a time; it claims at most the free slots, max_in_flight 2) may commit after it.
    expect(await startedBetween('A', item.created_at, item.started_at)).toBeLessThanOrEqual(TEST_BACKEND === 'postgres' ? 2 : 0);
    expect(item.started_at - item.created_at).toBeLessThan(2000); // within one call's latency, not 250 calls'
  }, 60_000);

  it('two bulk runs of the same class take turns: B’s children are not stuck behind A’s backlog', async () => {
    h = await Harness.start({ latencyMs: 100 });
    h.writeConfig({ engine: { max_in_flight: 2 } });
    await h.importProject(project('A', 300));
    await h.importProject(project('B', 3));
    await h.json<CommandJson>(['generate-all', '--project', 'A']);
    await waitUntil(() => h.sim.calls.length >= 4, 'project A to be under way');
    const b = await h.json<CommandJson>(['generate-all', '--project', 'B']);
    expect((await h.waitForEnd(b.thread_id)).status).toBe('complete');
    const bItems = await h.query<any>("SELECT created_at, started_at FROM llm_work_items WHERE project_id = 'B'");
    const enqueued = Math.min(...bItems.map((i) => i.created_at));
    const lastB = Math.max(...bItems.map((i) => i.started_at));
    // Round robin: A and B alternate, so A got about as many claims as B's 3 (one extra for a slot race).
    expect(await startedBetween('A', enqueued, lastB)).toBeLessThanOrEqual(4);
  }, 60_000);
});
