/**
 * A misbehaving provider (issue 14, items 7, 9, 10, 11): a 429 asking for an absurd wait, a huge
 * answer, a server that refuses JSON-schema response formats, a connection reset in the middle of an
 * answer. Each ends in a state a user can act on, with an error that says what happened.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { FAST_RETRY, Harness, project, waitUntil, type CommandJson } from '../helpers/harness.js';

let h: Harness;
afterEach(() => h?.cleanup());

async function setup(config: object = FAST_RETRY) {
  h = await Harness.start();
  h.writeConfig(config);
  await h.importProject(project('p', 1));
}

async function errorsOf(threadId: string): Promise<any[]> {
  return (await h.json<any[]>(['ledger', threadId])).filter((e) => e.entry_type === 'error').map((e) => e.payload);
}

describe('Retry-After: 999999', () => {
  it('is cut to retry.max_provider_wait, logged with the provider value, and the call goes through', async () => {
    await setup({ retry: { ...FAST_RETRY.retry, max_provider_wait: '1s' } });
    h.setFaults([{ kind: 'rate_limit', retry_after_s: 999999, times: 1 }]);
    const r = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E1']);
    expect((await h.waitForEnd(r.thread_id)).status).toBe('complete');
    const [err] = await errorsOf(r.thread_id);
    expect(err).toMatchObject({ code: 'PROVIDER_RATE_LIMIT', next: 'retry', retry_after_ms: 1000, provider_retry_after_ms: 999_999_000 });
    expect(h.sim.calls[1]!.at - h.sim.calls[0]!.at).toBeLessThan(60_000);
    expect(h.logText()).toMatch(/"provider_retry_after_ms":999999000/);
  });

  it('shows the hold in health and thread, and `combine retry` releases the parked item now', async () => {
    await setup(); // default cap: 10 minutes
    h.setFaults([{ kind: 'rate_limit', retry_after_s: 999999, times: 1 }]);
    const r = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E1']);
    const t = await waitUntil(async () => {
      const v = await h.json<any>(['thread', r.thread_id]);
      return v.hold ? v : null;
    }, 'the item to wait after the 429');
    const until = Date.parse(t.hold.until) - Date.now();
    expect(t.hold).toMatchObject({ reason: 'rate_limit', error_code: 'PROVIDER_RATE_LIMIT' });
    expect(until).toBeGreaterThan(8 * 60_000);
    expect(until).toBeLessThanOrEqual(10 * 60_000 + 5_000);
    const health = await h.json<any>(['health']);
    expect(Date.parse(health.rate_limits['test-model'].parked_until) - Date.now()).toBeGreaterThan(8 * 60_000);
    const human = await h.cli(['thread', r.thread_id]);
    expect(human.stdout).toMatch(/waiting +until .*rate_limit/);

    const retried = await h.cli(['retry', r.thread_id]);
    expect(retried.code).toBe(0);
    expect((await h.waitForEnd(r.thread_id)).status).toBe('complete');
    expect(h.sim.calls).toHaveLength(2);
    expect((await h.json<any>(['health'])).rate_limits['test-model'].parked_until).toBeNull();
  });
});

describe('answer size', () => {
  it.each([
    ['with a Content-Length', false],
    ['streamed without a length', true],
  ])('a 30 MB answer (%s) is PROVIDER_ERROR "answer too large", not stored', async (_label, chunked) => {
    await setup();
    h.setFaults([{ kind: 'huge', size_bytes: 30 * 2 ** 20, chunked }]);
    const r = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E1']);
    const end = await h.waitForEnd(r.thread_id);
    expect(end.status).toBe('failed');
    const errors = await errorsOf(r.thread_id);
    expect(errors).toEqual([expect.objectContaining({ code: 'PROVIDER_ERROR', class: 'permanent', next: 'dead_letter' })]);
    expect(errors[0].message).toMatch(/answer too large.*provider\.max_answer_bytes/);
    const ledger = await h.json<any[]>(['ledger', r.thread_id]);
    expect(ledger.some((e) => e.entry_type === 'response')).toBe(false);
    expect(end.usage.in_doubt_calls).toBe(1); // a 2xx was sent: it may have been billed
    const biggest = (await h.queryOne<{ n: number }>('SELECT max(length(payload)) AS n FROM llm_ledger_entries'))!.n;
    expect(biggest).toBeLessThan(64 * 1024);
  });
});

describe('response format', () => {
  it('a 400 "json_schema not supported" names the setting to change', async () => {
    await setup();
    h.setFaults([{ kind: 'json_schema_unsupported' }]);
    const r = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E1']);
    expect((await h.waitForEnd(r.thread_id)).status).toBe('failed');
    const [err] = await errorsOf(r.thread_id);
    expect(err).toMatchObject({ code: 'PROVIDER_ERROR', class: 'permanent', http_status: 400 });
    expect(err.message).toMatch(/set provider\.response_format to "json_object"/);
    expect(err.message).toMatch(/not supported by this server/);
  });

  it('json_object: the schema goes into the system message, and the answer is validated against it', async () => {
    await setup({ ...FAST_RETRY, provider: { response_format: 'json_object' }, operations: { story_generate_epic: { on_invalid: { repair: 1 } } } });
    h.setFaults([{ kind: 'schema_invalid', times: 1 }, { kind: 'json_schema_unsupported' }]);
    const r = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E1']);
    expect((await h.waitForEnd(r.thread_id)).status).toBe('complete');
    const ledger = await h.json<any[]>(['ledger', r.thread_id]);
    const prompt = ledger.find((e) => e.entry_type === 'prompt')!.payload.request;
    expect(prompt.response_format).toEqual({ type: 'json_object' });
    expect(prompt.messages[0].content).toContain('must match this JSON schema');
    expect(ledger.map((e) => e.entry_type)).toContain('error'); // the invalid answer was caught and repaired
    expect(ledger.find((e) => e.entry_type === 'error')!.payload.code).toBe('SCHEMA_INVALID');
  });

  it('none: no response_format is sent at all', async () => {
    await setup({ ...FAST_RETRY, provider: { response_format: 'none' } });
    h.setFaults([{ kind: 'json_schema_unsupported' }]);
    const r = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E1']);
    expect((await h.waitForEnd(r.thread_id)).status).toBe('complete');
    const prompt = (await h.json<any[]>(['ledger', r.thread_id])).find((e) => e.entry_type === 'prompt')!.payload.request;
    expect(prompt).not.toHaveProperty('response_format');
  });

  it('refuses an unknown response_format at start, naming the field', async () => {
    await setup();
    await h.stopDaemon();
    h.writeConfig({ provider: { response_format: 'xml' } });
    const r = await h.cli(['daemon', 'start']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('provider.response_format');
  });
});

describe('a connection reset in the middle of an answer', () => {
  it('is PROVIDER_ERROR (transient), says the connection dropped, and is retried', async () => {
    await setup();
    h.setFaults([{ kind: 'reset_mid_body', times: 1 }]);
    const r = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E1']);
    expect((await h.waitForEnd(r.thread_id)).status).toBe('complete');
    const [err] = await errorsOf(r.thread_id);
    expect(err).toMatchObject({ code: 'PROVIDER_ERROR', class: 'transient', next: 'retry' });
    expect(err.message).toMatch(/the connection dropped while the answer was being received/);
  });
});
