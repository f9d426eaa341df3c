/** retry, cancel, deadlines and the circuit breaker, against the real daemon. */
import { afterEach, describe, expect, it } from 'vitest';
import { FAST_RETRY, Harness, project, waitUntil, type CommandJson, type ThreadJson } from '../helpers/harness.js';

let h: Harness;
afterEach(() => h?.cleanup());

async function status(threadId: string): Promise<string> {
  return (await h.json<ThreadJson>(['thread', threadId])).status;
}

describe('combine retry', () => {
  it('adds a work item to a failed thread, refuses active and complete ones', async () => {
    h = await Harness.start({ faults: [{ kind: 'auth', times: 1 }] });
    h.writeConfig(FAST_RETRY);
    await h.importProject(project('p', 1));
    const r = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E1']);
    expect((await h.waitForEnd(r.thread_id)).status).toBe('failed');

    const retried = await h.json<ThreadJson>(['retry', r.thread_id]);
    expect(retried).toMatchObject({ thread_id: r.thread_id, status: 'open', closed_at: null });
    expect((await h.waitForEnd(r.thread_id)).status).toBe('complete');
    const detail = await h.json(['thread', r.thread_id]);
    expect(detail.status).toBe('complete');
    const items = await h.query('SELECT sequence, status FROM llm_work_items WHERE thread_id = ? ORDER BY sequence', [r.thread_id]);
    expect(items).toEqual([
      { sequence: 1, status: 'dead_letter' },
      { sequence: 2, status: 'applied' },
    ]);

    const refused = await h.cli(['retry', r.thread_id]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('it is complete; only failed threads can be retried');
  });

  it('retries the failed children of a failed generate-all and closes it complete', async () => {
    h = await Harness.start({ faults: [{ kind: 'auth', match: 'Epic id: E2', times: 1 }] });
    await h.importProject(project('p', 3));
    const r = await h.json<CommandJson>(['generate-all', '--project', 'p']);
    const failed = await h.waitForEnd(r.thread_id);
    expect(failed).toMatchObject({ status: 'failed', child_summary: { complete: 2, failed: 1 } });
    await h.json(['retry', r.thread_id]);
    const done = await h.waitForEnd(r.thread_id);
    expect(done).toMatchObject({ status: 'complete', child_summary: { complete: 3 } });
    expect(h.sim.calls.filter((c) => c.epic_id === 'E1')).toHaveLength(1); // completed children are not re-run
  });
});

describe('combine cancel', () => {
  it('aborts an in-flight call, records CANCELED, and never applies', async () => {
    h = await Harness.start({ faults: [{ kind: 'hang' }] });
    await h.importProject(project('p', 1));
    const r = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E1']);
    await waitUntil(() => h.sim.calls.length === 1, 'the call to start');
    const early = await h.cli(['retry', r.thread_id]);
    expect(early.code).toBe(1);
    expect(early.stderr).toContain('still running');
    const canceled = await h.json<ThreadJson>(['cancel', r.thread_id]);
    expect(canceled.status).toBe('canceled');
    const ledger = await waitUntil(async () => {
      const l = await h.json<any[]>(['ledger', r.thread_id]);
      return l.some((e) => e.entry_type === 'error') && l;
    }, 'the CANCELED entry');
    expect(ledger.map((e) => e.entry_type)).toEqual(['prompt', 'error']);
    expect(ledger[1].payload).toMatchObject({ code: 'CANCELED', class: 'canceled', next: 'canceled' });
    const backlog = await h.json(['backlog', 'p']);
    expect(backlog.epics[0].stories).toEqual([]);
    expect((await h.json(['ledger', 'verify'])).ok).toBe(true);
    const again = await h.cli(['cancel', r.thread_id, '--json']);
    expect(again.code).toBe(0); // canceling a canceled thread is a no-op
  });

  it('cascades from a generate-all to its children, queued and running', async () => {
    h = await Harness.start({ faults: [{ kind: 'hang' }] });
    h.writeConfig({ engine: { max_in_flight: 2 } });
    await h.importProject(project('p', 5));
    const r = await h.json<CommandJson>(['generate-all', '--project', 'p']);
    await waitUntil(() => h.sim.calls.length === 2, 'two calls in flight');
    await h.json(['cancel', r.thread_id]);
    const final = await h.waitForEnd(r.thread_id);
    expect(final.status).toBe('canceled');
    const children = await waitUntil(async () => {
      const c = (await h.json<ThreadJson[]>(['threads', '--project', 'p'])).filter((t) => t.parent_thread_id === r.thread_id);
      return c.every((t) => t.status === 'canceled') && c;
    }, 'every child canceled');
    expect(children).toHaveLength(5);
    const items = await h.query('SELECT status, error_code, count(*) AS n FROM llm_work_items GROUP BY status, error_code');
    const locks = await h.queryOne('SELECT count(*) AS n FROM locks');
    expect(items).toEqual([{ status: 'failed', error_code: 'CANCELED', n: 5 }]);
    expect(locks).toEqual({ n: 0 });
    expect(h.sim.calls).toHaveLength(2);
  });

  it('refuses to cancel a completed thread (exit 1)', async () => {
    h = await Harness.start();
    await h.importProject(project('p', 1));
    const r = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E1']);
    await h.waitForEnd(r.thread_id);
    const c = await h.cli(['cancel', r.thread_id]);
    expect(c.code).toBe(1);
    expect(c.stderr).toContain('already complete');
  });
});

describe('deadlines', () => {
  it('fails an item not started by its deadline with SKIPPED_DEADLINE, without a call', async () => {
    // E1's call holds the only slot until the end of the test.
    h = await Harness.start({ faults: [{ kind: 'hold', match: 'Epic id: E1' }] });
    h.writeConfig({ engine: { max_in_flight: 1 } });
    await h.importProject(project('p', 2));
    const busy = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E1']);
    const late = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E2', '--deadline', '300ms']);
    const final = await h.waitForEnd(late.thread_id);
    expect(final.status).toBe('failed');
    expect(await status(busy.thread_id)).toBe('running'); // it failed at its deadline, not when the slot freed
    const ledger = await h.json<any[]>(['ledger', late.thread_id]);
    expect(ledger.map((e) => e.payload.code)).toEqual(['SKIPPED_DEADLINE']);
    expect(h.sim.calls.every((c) => c.epic_id === 'E1')).toBe(true);
    const bad = await h.cli(['generate-epic', '--project', 'p', '--epic', 'E2', '--deadline', 'soon']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--deadline');
  });
});

describe('circuit breaker', () => {
  it('opens after 5 consecutive transient failures: no call starts and no attempt is burned until a probe succeeds', async () => {
    h = await Harness.start({ faults: [{ kind: 'server_error' }] });
    h.writeConfig({ retry: { base: '20ms', cap: '20ms', max_attempts: 10 }, breaker: { failure_threshold: 5, open: '1500ms' } });
    await h.importProject(project('p', 1));
    const r = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E1']);
    const health = await waitUntil(async () => {
      const res = await h.cli(['health', '--json']);
      const body = JSON.parse(res.stdout);
      return body.breakers[h.sim.url]?.state === 'open' && { res, body };
    }, 'the breaker to open');
    expect(health.res.code).toBe(1); // not ready while the provider's breaker is open
    expect(health.body.checks.provider_breakers_closed).toBe(false);
    expect(h.sim.calls).toHaveLength(5);
    h.setFaults([]); // the provider recovers
    const attemptWhileOpen = await h.queryOne('SELECT attempt, status FROM llm_work_items WHERE thread_id = ?', [r.thread_id]);
    expect(attemptWhileOpen).toEqual({ attempt: 6, status: 'queued' });
    const final = await h.waitForEnd(r.thread_id);
    expect(final.status).toBe('complete');
    expect(h.sim.calls).toHaveLength(6); // one probe, which succeeded
    const after = await h.json(['health']);
    expect(after.breakers[h.sim.url]).toMatchObject({ state: 'closed', times_opened: 1 });
  });
});
