/**
 * Budgets and cost against the real daemon and simulator: the claim reserves a call's maximum before
 * the call; an item over budget is parked with no call made and resumes when the budget allows; usage
 * is counted once per paid call through retries, repairs and a crash; the dry run enqueues nothing.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { FAST_RETRY, Harness, project, waitForExit, waitUntil, type CommandJson, type ThreadJson, type UsageJson } from '../helpers/harness.js';

let h: Harness;
afterEach(() => h?.cleanup());

const PRICES = { 'test-model': { input_per_million_usd: 1, output_per_million_usd: 4 } };

/** Usage as the ledger proves it: the sum of every recorded response's usage. */
async function ledgerResponseUsage() {
  const rows = await h.query<{ payload: string }>("SELECT payload FROM llm_ledger_entries WHERE entry_type = 'response'");
  const usages = rows.map((r) => JSON.parse(r.payload).usage).filter(Boolean);
  return {
    responses: rows.length,
    prompt_tokens: usages.reduce((n, u) => n + u.prompt_tokens, 0),
    completion_tokens: usages.reduce((n, u) => n + u.completion_tokens, 0),
    total_tokens: usages.reduce((n, u) => n + u.total_tokens, 0),
  };
}

describe('budgets', () => {
  it('a budget smaller than one call parks the item with no provider call; raising it lets the item run', async () => {
    h = await Harness.start();
    h.writeConfig({ ...FAST_RETRY, budgets: { projects: { p: { total_tokens: 100 } } } });
    await h.importProject(project('p', 1));
    const r = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E1']);
    const item = await waitUntil(async () => {
      const row = await h.queryOne<any>('SELECT * FROM llm_work_items WHERE thread_id = ?', [r.thread_id]);
      return row?.error_code === 'BUDGET_EXCEEDED' ? row : null;
    }, 'the item to be parked');
    expect(item).toMatchObject({ status: 'queued', attempt: 1 });
    expect(item.error_message).toMatch(/total_tokens 100 tokens.*resumes when the budget is raised/);
    expect((await h.json<ThreadJson>(['thread', r.thread_id])).status).toBe('open');
    const human = await h.cli(['thread', r.thread_id]);
    expect(human.stdout).toContain('BUDGET_EXCEEDED');
    expect(h.sim.calls).toHaveLength(0);
    expect(await h.json<any[]>(['ledger', r.thread_id])).toEqual([]); // nothing was asked, nothing paid

    await h.stopDaemon();
    h.writeConfig({ ...FAST_RETRY, budgets: { projects: { p: { total_tokens: 1_000_000 } } } });
    const final = await h.waitForEnd(r.thread_id); // restarts the daemon with the raised budget
    expect(final.status).toBe('complete');
    expect(h.sim.calls).toHaveLength(1);
    const usage = await h.json(['usage', '--project', 'p']);
    expect(usage.budgets[0]).toMatchObject({ project_id: 'p', limits: { total_tokens: 1_000_000 } });
    expect(usage.budgets[0].spent_total.tokens).toBe((await ledgerResponseUsage()).total_tokens);
  });

  it('an item that does not fit next to an in-flight reservation waits, and runs once that call settles below its maximum', async () => {
    h = await Harness.start({ latencyMs: 300 });
    await h.importProject(project('p', 2));
    h.writeConfig({});
    const dry = await h.json(['generate-all', '--project', 'p', '--dry-run']);
    const perCall = Math.ceil(dry.estimated_max_tokens / dry.calls);
    // Room for one reservation at a time, and for a second call once the first settles at its real usage.
    await h.stopDaemon();
    h.writeConfig({ budgets: { projects: { p: { total_tokens: Math.floor(perCall * 1.6) } } } });
    const r = await h.cli(['generate-all', '--project', 'p', '--follow', '--json']);
    expect(r.code, r.stderr).toBe(0);
    const events = r.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    // The park happened at the first claim, before `--follow` subscribed: the daemon's event log has it.
    expect(h.logText()).toMatch(/"event":"work_item".*"status":"queued".*"error_code":"BUDGET_EXCEEDED"/);
    expect(events.at(-1)).toMatchObject({ status: 'complete', child_summary: { complete: 2 } });
    // The two calls never overlapped: the second started after the first was answered.
    const [first, second] = h.sim.calls;
    expect(second!.at - first!.at).toBeGreaterThanOrEqual(300);
  });

  it('usage totals equal the sum of the recorded responses’ usage after a run with retries, a repair and a crash', async () => {
    h = await Harness.start();
    // One call at a time, so the crash leaves no other call in doubt and every count below is exact.
    // Repair is opt-in (the default dead-letters an invalid answer): this run exercises one.
    h.writeConfig({ ...FAST_RETRY, prices: PRICES, engine: { max_in_flight: 1 }, operations: { story_generate_epic: { on_invalid: { repair: 1 } } } });
    await h.importProject(project('p', 4));
    h.setFaults([
      { kind: 'server_error', match: 'Epic id: E1', times: 2 },
      { kind: 'schema_invalid', match: 'Epic id: E2', times: 1 },
      { kind: 'malformed', match: 'Epic id: E3', times: 1 },
    ]);
    await h.stopDaemon();
    const pid = await h.startDaemon({ COMBINE_CRASH_AT: 'after_response' });
    const r = await h.json<CommandJson>(['generate-all', '--project', 'p']);
    await waitForExit(pid); // killed right after the first response was recorded
    await h.startDaemon();
    const final = await h.waitForEnd(r.thread_id);
    expect(final.status).toBe('complete');

    const truth = await ledgerResponseUsage();
    // Every 200 the simulator sent is one recorded response: nothing paid twice, nothing lost.
    expect(h.sim.calls.filter((c) => c.status === 200)).toHaveLength(truth.responses);
    const usage = await h.json<{ totals: UsageJson; rows: any[] }>(['usage']);
    expect(usage.totals).toMatchObject({
      prompt_tokens: truth.prompt_tokens,
      completion_tokens: truth.completion_tokens,
      total_tokens: truth.total_tokens,
      in_doubt_calls: 1, // the malformed answer: paid, usage unknown
      reserved_calls: 0,
    });
    expect(usage.totals.calls).toBe(truth.responses);
    expect(usage.totals.cost_usd).toBeCloseTo((truth.prompt_tokens * 1 + truth.completion_tokens * 4) / 1e6, 6);
    // Wasted: the schema-invalid answer that needed a repair (the malformed one is in doubt).
    expect(usage.totals.wasted_calls).toBe(1);
    expect(usage.rows).toHaveLength(1);

    // The orchestration's roll-up includes its children, wasted attempts too.
    const parent = await h.json<ThreadJson>(['thread', r.thread_id]);
    expect(parent.usage).toMatchObject({ total_tokens: truth.total_tokens, calls: truth.responses, wasted_calls: 1 });
    const children = (await h.json<ThreadJson[]>(['threads', '--project', 'p'])).filter((t) => t.parent_thread_id === r.thread_id);
    expect(children.reduce((n, c) => n + c.usage.total_tokens, 0)).toBe(truth.total_tokens);
    const e2 = children.find((c) => c.target_ref.epic_id === 'E2')!;
    expect(e2.usage).toMatchObject({ calls: 2, wasted_calls: 1 });
  });

  it('a call interrupted by a crash counts as spent (in doubt, at its reserved maximum)', async () => {
    h = await Harness.start({ latencyMs: 1500 });
    h.writeConfig(FAST_RETRY);
    await h.importProject(project('p', 1));
    await h.stopDaemon();
    const pid = await h.startDaemon({ COMBINE_CRASH_AT: 'during_call' });
    const r = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E1']);
    await waitForExit(pid);
    await h.startDaemon();
    expect((await h.waitForEnd(r.thread_id)).status).toBe('complete');
    const t = await h.json<ThreadJson>(['thread', r.thread_id]);
    expect(t.usage.in_doubt_calls).toBe(1);
    expect(t.usage.in_doubt_tokens).toBeGreaterThan(2048); // prompt estimate + max_tokens
    expect(t.usage.total_tokens).toBe((await ledgerResponseUsage()).total_tokens);
    const usage = await h.json(['usage', '--project', 'p']);
    expect(usage.budgets[0].spent_total.tokens).toBe(t.usage.total_tokens + t.usage.in_doubt_tokens);
  });
});

describe('dry run and configuration', () => {
  it('generate-all --dry-run prints one call per epic and its maximum cost, and enqueues nothing', async () => {
    h = await Harness.start();
    h.writeConfig({ prices: PRICES, provider: { max_tokens: 1000 } });
    await h.importProject(project('p', 7));
    const d = await h.json(['generate-all', '--project', 'p', '--dry-run']);
    expect(d).toMatchObject({ project_id: 'p', calls: 7, model: 'test-model', priced: true });
    expect(d.estimated_max_tokens).toBeGreaterThan(7 * 1000);
    // Cost at the published prices: prompt tokens at $1/M, up to max_tokens at $4/M each.
    const promptTokens = d.estimated_max_tokens - 7 * 1000;
    expect(d.estimated_max_cost).toBeCloseTo((promptTokens * 1 + 7 * 1000 * 4) / 1e6, 6);
    expect(await h.json(['threads'])).toEqual([]);
    expect(h.sim.calls).toHaveLength(0);
    const human = await h.cli(['generate-all', '--project', 'p', '--dry-run']);
    expect(human.stdout).toContain('nothing was enqueued');
  });

  it('config show prints the effective configuration with the key redacted; a bad budget names its field', async () => {
    h = await Harness.start();
    h.writeConfig({ engine: { max_queued: 500 }, budgets: { default: { daily_tokens: 5000 } }, scheduling: { project_weights: { acme: 3 } } });
    const c = await h.json(['config', 'show'], { env: { COMBINE_MAX_IN_FLIGHT: '3' } });
    expect(c.maxInFlight).toBe(3);
    expect(c.flow).toMatchObject({ maxQueued: 500, budgets: { default: { daily_tokens: 5000 } }, projectWeights: { acme: 3 } });
    expect(c.provider.api_key).toBe('set (redacted)');
    expect(JSON.stringify(c)).not.toContain(h.env.OPENAI_API_KEY!);

    await h.stopDaemon();
    h.writeConfig({ budgets: { projects: { acme: { total_tokens: -5 } } } });
    const bad = await h.cli(['config', 'show']);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain('budgets.projects.acme.total_tokens');
    h.writeConfig({ budgets: { default: { daily_cost_usd: 1 } } });
    const unpriced = await h.cli(['config', 'show']);
    expect(unpriced.stderr).toContain('prices has no entry for the model "test-model"');
  });
});
