/**
 * Failure semantics against the simulator: each provider fault ends in the state the failure table
 * says, with every attempt in the ledger.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { FAST_RETRY, Harness, project, type CommandJson } from '../helpers/harness.js';

let h: Harness;
afterEach(() => h?.cleanup());

async function runEpic() {
  const r = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E1']);
  const final = await h.waitForEnd(r.thread_id);
  const ledger = await h.json<any[]>(['ledger', r.thread_id]);
  const items = await h.query<any>('SELECT * FROM llm_work_items WHERE thread_id = ? ORDER BY sequence', [r.thread_id]);
  return { final, ledger, items, errors: ledger.filter((e) => e.entry_type === 'error').map((e) => e.payload) };
}

async function setup(config: object = FAST_RETRY, sim = {}) {
  h = await Harness.start(sim);
  h.writeConfig(config);
  await h.importProject(project('p', 1));
}

describe('provider failures', () => {
  it('429 with Retry-After: waits at least that long, then succeeds', async () => {
    await setup();
    h.setFaults([{ kind: 'rate_limit', retry_after_s: 1, times: 1 }]);
    const { final, errors, items, ledger } = await runEpic();
    expect(final.status).toBe('complete');
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({ code: 'PROVIDER_RATE_LIMIT', class: 'transient', attempt: 1, next: 'retry', retry_after_ms: 1000 });
    expect(errors[0].delay_ms).toBeGreaterThanOrEqual(1000);
    const [first, second] = h.sim.calls;
    expect(second!.at - first!.at).toBeGreaterThanOrEqual(1000);
    expect(items[0]).toMatchObject({ status: 'applied', attempt: 2 });
    expect(ledger.map((e) => e.entry_type)).toEqual(['prompt', 'error', 'prompt', 'response', 'parse_report', 'mutation_report']);
  });

  it('500: retried with backoff until attempts run out, then dead_letter', async () => {
    await setup();
    h.setFaults([{ kind: 'server_error' }]);
    const { final, errors, items } = await runEpic();
    expect(final.status).toBe('failed');
    expect(errors.map((e) => [e.code, e.attempt, e.next])).toEqual([
      ['PROVIDER_ERROR', 1, 'retry'],
      ['PROVIDER_ERROR', 2, 'retry'],
      ['PROVIDER_ERROR', 3, 'dead_letter'],
    ]);
    expect(errors[2].reason).toContain('attempts exhausted');
    expect(items[0]).toMatchObject({ status: 'dead_letter', attempt: 3, error_code: 'PROVIDER_ERROR' });
    expect(h.sim.calls).toHaveLength(3);
  });

  it('a hang past the call timeout is PROVIDER_TIMEOUT and retried', async () => {
    await setup({ ...FAST_RETRY, provider: { timeout: '500ms' } });
    h.setFaults([{ kind: 'hang', times: 1 }]);
    const { final, errors } = await runEpic();
    expect(final.status).toBe('complete');
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({ code: 'PROVIDER_TIMEOUT', class: 'transient', next: 'retry' });
  });

  it('connection refused: transient, retried, dead_letter when it never comes back', async () => {
    await setup();
    const { final, errors } = await runEpic();
    expect(final.status).toBe('complete'); // sanity: the simulator works
    await h.stopDaemon();
    h.env.OPENAI_BASE_URL = 'http://127.0.0.1:9/v1'; // discard port: nothing listens
    const second = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E1', '--force']);
    const end = await h.waitForEnd(second.thread_id);
    const ledger = await h.json<any[]>(['ledger', second.thread_id]);
    const errs = ledger.filter((e) => e.entry_type === 'error').map((e) => e.payload);
    expect(end.status).toBe('failed');
    expect(errs.map((e) => e.code)).toEqual(['PROVIDER_ERROR', 'PROVIDER_ERROR', 'PROVIDER_ERROR']);
    expect(errs[0].message).toMatch(/cannot reach the provider/);
    expect(errors).toHaveLength(0);
  });

  it('401: permanent, dead_letter at once with no retry, and the key never reaches log or ledger', async () => {
    await setup();
    h.setFaults([{ kind: 'auth' }]);
    const { final, errors, items, ledger } = await runEpic();
    expect(final.status).toBe('failed');
    expect(errors).toEqual([expect.objectContaining({ code: 'PROVIDER_AUTH', class: 'permanent', attempt: 1, next: 'dead_letter' })]);
    expect(items[0]).toMatchObject({ status: 'dead_letter', attempt: 1 });
    expect(h.sim.calls).toHaveLength(1);
    const key = h.env.OPENAI_API_KEY!;
    expect(errors[0].message).toContain('Incorrect API key provided: [redacted]');
    expect(JSON.stringify(ledger)).not.toContain(key);
    expect(h.logText()).not.toContain(key);
  });

  it('schema-invalid, by default: one call, then dead_letter with SCHEMA_INVALID and no second call', async () => {
    await setup();
    h.setFaults([{ kind: 'schema_invalid', times: 1 }]);
    const { final, errors, items, ledger } = await runEpic();
    expect(final.status).toBe('failed');
    expect(ledger.map((e) => e.entry_type)).toEqual(['prompt', 'response', 'parse_report', 'error']);
    expect(errors).toEqual([expect.objectContaining({ code: 'SCHEMA_INVALID', class: 'permanent', next: 'dead_letter' })]);
    expect(items[0]).toMatchObject({ status: 'dead_letter', attempt: 1, repair_count: 0, error_code: 'SCHEMA_INVALID' });
    expect(h.sim.calls).toHaveLength(1);
  });

  /** Repair is opt-in per operation. */
  const REPAIR_ONCE = { ...FAST_RETRY, operations: { story_generate_epic: { on_invalid: { repair: 1 } } } };

  it('schema-invalid then valid after one repair (on_invalid.repair: 1): the repair is its own prompt/response pair', async () => {
    await setup(REPAIR_ONCE);
    h.setFaults([{ kind: 'schema_invalid', times: 1 }]);
    const { final, ledger, items } = await runEpic();
    expect(final.status).toBe('complete');
    expect(ledger.map((e) => e.entry_type)).toEqual(['prompt', 'response', 'parse_report', 'error', 'prompt', 'response', 'parse_report', 'mutation_report']);
    expect(ledger[3].payload).toMatchObject({ code: 'SCHEMA_INVALID', next: 'repair', repair: 1 });
    const repairPrompt = ledger[4].payload;
    expect(repairPrompt.repair).toBe(1);
    expect(repairPrompt.request.messages.at(-1).content).toContain('does not match the required JSON schema');
    expect(repairPrompt.request.messages.at(-2).role).toBe('assistant');
    expect(items[0]).toMatchObject({ status: 'applied', attempt: 1, repair_count: 1 });
    expect(h.sim.calls.map((c) => c.repair)).toEqual([false, true]);
  });

  it('schema-invalid twice (on_invalid.repair: 1): dead_letter with SCHEMA_INVALID after the repair also fails', async () => {
    await setup(REPAIR_ONCE);
    h.setFaults([{ kind: 'schema_invalid' }]);
    const { final, errors, items } = await runEpic();
    expect(final.status).toBe('failed');
    expect(errors.map((e) => [e.code, e.next])).toEqual([
      ['SCHEMA_INVALID', 'repair'],
      ['SCHEMA_INVALID', 'dead_letter'],
    ]);
    expect(items[0]).toMatchObject({ status: 'dead_letter', error_code: 'SCHEMA_INVALID', repair_count: 1 });
    expect(h.sim.calls).toHaveLength(2);
  });

  it('a malformed body is recorded, then retried as a provider error', async () => {
    await setup();
    h.setFaults([{ kind: 'malformed', times: 1 }]);
    const { final, ledger } = await runEpic();
    expect(final.status).toBe('complete');
    const first = ledger.find((e) => e.entry_type === 'response')!;
    expect(first.payload.body_text).toContain('"choices"');
    expect(ledger.find((e) => e.entry_type === 'error')!.payload).toMatchObject({ code: 'PROVIDER_ERROR', class: 'transient' });
  });
});
