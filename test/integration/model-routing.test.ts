/**
 * The model router and escalation (issue 16, items 1 and 2): logical models routed to real models on
 * their own endpoints, each with its own breaker; an answer that fails the schema dead-letters by
 * default, or — opted in per operation — gets one call to a stronger model in the same attempt.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createSimulator, type Simulator } from '../../src/sim/simulator.js';
import { FAST_RETRY, Harness, project, waitUntil, type CommandJson } from '../helpers/harness.js';

let h: Harness;
let strongSim: Simulator | undefined;
afterEach(async () => {
  await h?.cleanup();
  await strongSim?.close();
  strongSim = undefined;
});

const PRICE = { input_per_million_usd: 1, output_per_million_usd: 4 };
const STRONG_PRICE = { input_per_million_usd: 10, output_per_million_usd: 40 };

/** `cheap` on the harness's simulator, `strong` on a second one with its own key; story generation escalates. */
async function setup(extra: Record<string, unknown> = {}) {
  h = await Harness.start();
  strongSim = await createSimulator();
  h.env.STRONG_API_KEY = 'sk-strong-0123456789abcdef';
  h.writeConfig({
    ...FAST_RETRY,
    models: {
      cheap: { model: 'cheap-model', prices: PRICE },
      strong: { model: 'strong-model', base_url: strongSim.url, api_key_env: 'STRONG_API_KEY', prices: STRONG_PRICE },
    },
    prices: { 'test-model': PRICE },
    operations: { story_generate_epic: { model: 'cheap', on_invalid: { escalate_to: 'strong' } } },
    ...extra,
  });
  await h.importProject(project('p', 2));
}

describe('model routing and escalation', () => {
  it('escalates an invalid cheap answer to the strong model: complete in one attempt, both calls in the ledger, two models in thread --json', async () => {
    await setup();
    h.setFaults([{ kind: 'schema_invalid', model: 'cheap-model', times: 1 }]);
    const r = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E1']);
    const final = await h.waitForEnd(r.thread_id);
    expect(final.status).toBe('complete');

    // One call to each endpoint, each to its own model; the strong one saw the errors.
    expect(h.sim.calls.map((c) => c.model)).toEqual(['cheap-model']);
    expect(strongSim!.calls.map((c) => c.model)).toEqual(['strong-model']);
    expect(strongSim!.calls[0]!.repair).toBe(true); // the conversation carries the invalid answer and the errors

    const ledger = await h.json<any[]>(['ledger', r.thread_id]);
    expect(ledger.map((e) => e.entry_type)).toEqual(['prompt', 'response', 'parse_report', 'error', 'prompt', 'response', 'parse_report', 'mutation_report']);
    expect(ledger[0].payload).toMatchObject({ logical_model: 'cheap', model: 'cheap-model', attempt: 1 });
    expect(ledger[0].payload.request.model).toBe('cheap-model');
    expect(ledger[3].payload).toMatchObject({ code: 'SCHEMA_INVALID', next: 'escalate', escalate_to: 'strong', attempt: 1 });
    expect(ledger[4].payload).toMatchObject({
      logical_model: 'strong',
      model: 'strong-model',
      escalation: true,
      attempt: 1,
      endpoint: `${strongSim!.url} (STRONG_API_KEY)`,
    });
    expect(ledger[4].payload.request.messages.at(-1).content).toContain('does not match the required JSON schema');
    // Each call has its own cost, at its own model's price.
    const [cheapCost, strongCost] = ledger.filter((e) => e.entry_type === 'response').map((e) => e.cost_usd);
    expect(cheapCost).toBeGreaterThan(0);
    expect(strongCost).toBeGreaterThan(cheapCost);

    const t = await h.json<any>(['thread', r.thread_id]);
    expect(t.escalated).toBe(true);
    expect(t.models).toEqual([
      { logical_model: 'cheap', model: 'cheap-model', calls: 1, total_tokens: expect.any(Number), cost_usd: cheapCost },
      { logical_model: 'strong', model: 'strong-model', calls: 1, total_tokens: expect.any(Number), cost_usd: strongCost },
    ]);
    expect(t.escalation).toMatchObject({ logical_model: 'strong', model: 'strong-model', calls: 1, cost_usd: strongCost });
    // The pass was one attempt: no retry, no backoff.
    expect(await workItems(r.thread_id)).toEqual([expect.objectContaining({ status: 'applied', attempt: 1, escalated: 1, repair_count: 0 })]);
    const human = await h.cli(['thread', r.thread_id]);
    expect(human.stdout).toMatch(/escalated to strong \(strong-model\): 1 call/);

    // The escalation was reserved and settled as its own charge, at the strong model's price.
    // Ids are time-ordered (UUIDv7, increasing within the daemon): they break a same-millisecond tie.
    const charges = await h.query('SELECT model, status, reserved_tokens FROM llm_charges WHERE thread_id = ? ORDER BY created_at, id', [r.thread_id]);
    expect(charges).toEqual([
      expect.objectContaining({ model: 'cheap-model', status: 'settled' }),
      expect.objectContaining({ model: `strong-model @ ${strongSim!.url} (STRONG_API_KEY)`, status: 'settled' }),
    ]);
    expect((await h.json<any>(['ledger', 'verify'])).ok).toBe(true);
  });

  it('reserves the escalation before it is sent: over the budget, it waits with BUDGET_EXCEEDED and nothing reaches the strong model', async () => {
    // The cheap call fits a $0.01 daily budget; the strong call's reservation (2048 tokens at $40/M) does not.
    await setup({ budgets: { default: { daily_cost_usd: 0.01 } } });
    h.setFaults([{ kind: 'schema_invalid', model: 'cheap-model', times: 1 }]);
    const r = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E1']);
    const parked = await waitUntil(
      async () => (await workItems(r.thread_id)).find((w) => w.error_code === 'BUDGET_EXCEEDED'),
      'the escalation parked for its budget',
    );
    expect(parked).toMatchObject({ status: 'queued', attempt: 1, escalated: 1 });
    expect((await h.json<any>(['thread', r.thread_id])).status).toBe('running');
    expect(h.sim.calls).toHaveLength(1);
    expect(strongSim!.calls).toHaveLength(0);
  });

  it('shows each operation’s logical and real model in config show; the string form of models still works', async () => {
    await setup();
    const c = await h.json<any>(['config', 'show']);
    expect(c.models.default).toMatchObject({ model: 'test-model', api_key: 'set (redacted)' });
    expect(c.models.strong).toMatchObject({
      model: 'strong-model',
      base_url: strongSim!.url,
      api_key_env: 'STRONG_API_KEY',
      api_key: 'set (redacted)',
      prices: STRONG_PRICE,
    });
    expect(c.routing.story_generate_epic).toEqual({
      model: 'cheap',
      provider_model: 'cheap-model',
      endpoint: h.sim.url,
      escalate_to: { model: 'strong', provider_model: 'strong-model', endpoint: `${strongSim!.url} (STRONG_API_KEY)` },
    });
    expect(c.routing.project_briefing).toMatchObject({ model: 'default', provider_model: 'test-model', escalate_to: null });
    expect(JSON.stringify(c)).not.toContain('sk-strong-0123456789abcdef');
    // In config.json's shape: the object form with what differs from the provider, never a key.
    expect(c.file.models).toEqual({
      cheap: { model: 'cheap-model', prices: PRICE },
      strong: { model: 'strong-model', base_url: strongSim!.url, api_key_env: 'STRONG_API_KEY', prices: STRONG_PRICE },
    });
    expect(c.file.operations.story_generate_epic).toMatchObject({ model: 'cheap', on_invalid: { escalate_to: 'strong' } });
    expect((await h.json<any>(['operations', 'show', 'story_generate_epic'])).escalate_to).toBe('strong');

    await h.stopDaemon();
    // The string form; COMBINE_MODEL (the harness sets test-model) wins over models.default.model.
    h.writeConfig({
      ...FAST_RETRY,
      models: { default: { model: 'file-default' }, fast: 'fast-model' },
      operations: { story_generate_epic: { model: 'fast' } },
    });
    const r = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E2']);
    expect((await h.waitForEnd(r.thread_id)).status).toBe('complete');
    expect(h.sim.calls.at(-1)!.model).toBe('fast-model');
    const routing = (await h.json<any>(['config', 'show'])).routing;
    expect(routing.project_briefing).toMatchObject({ model: 'default', provider_model: 'test-model' });
    await h.stopDaemon();
    const withoutEnv = await h.json<any>(['config', 'show'], { env: { COMBINE_MODEL: '' } });
    expect(withoutEnv.routing.project_briefing).toMatchObject({ model: 'default', provider_model: 'file-default' });
  });

  it('keeps a breaker per endpoint: the strong endpoint failing opens its breaker while cheap calls go on', async () => {
    await setup({ breaker: { failure_threshold: 2, open: '1m' } });
    strongSim!.setFaults([{ kind: 'server_error' }]);
    h.setFaults([{ kind: 'schema_invalid', match: 'Epic id: E1', model: 'cheap-model' }]);
    const e1 = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E1']);
    const health = await waitUntil(async () => {
      const r = await h.cli(['health', '--json']);
      const hj = JSON.parse(r.stdout);
      return Object.values(hj.breakers).some((b: any) => b.state === 'open') ? hj : null;
    }, 'the strong endpoint’s breaker to open');
    expect(health.ready).toBe(false);
    expect(health.checks.provider_breakers_closed).toBe(false);
    expect(health.breakers[`${strongSim!.url} (STRONG_API_KEY)`].state).toBe('open');
    expect(health.breakers[h.sim.url].state).toBe('closed');
    // E1 waits for the strong endpoint, with no attempt burned while its breaker is open; E2 runs on cheap.
    const e2 = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E2']);
    expect((await h.waitForEnd(e2.thread_id)).status).toBe('complete');
    const t1 = await h.json<any>(['thread', e1.thread_id]);
    expect(t1.status).toBe('running');
    expect(strongSim!.calls).toHaveLength(2);
  });

  it('refuses a configuration that names an unknown model, or a key variable that is not set (exit 2)', async () => {
    h = await Harness.start();
    h.writeConfig({ operations: { story_generate_epic: { on_invalid: { escalate_to: 'strong' } } } });
    const unknown = await h.cli(['daemon', 'start']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('operations.story_generate_epic.on_invalid.escalate_to: no model "strong" is configured');
    h.writeConfig({ models: { strong: { model: 'x', api_key_env: 'NOT_SET_ANYWHERE' } } });
    const unset = await h.cli(['daemon', 'start']);
    expect(unset.code).toBe(2);
    expect(unset.stderr).toContain('models.strong.api_key_env: the environment variable NOT_SET_ANYWHERE is not set');
  });
});

function workItems(threadId: string): Promise<any[]> {
  return h.query('SELECT * FROM llm_work_items WHERE thread_id = ? ORDER BY sequence', [threadId]);
}
