/**
 * Paying once (issue 14, items 1–3): a generate-all never pays again for an epic whose request already
 * completed; a call refused before anything was sent is released, not charged; and with
 * `interrupted: hold` a call in flight at a crash is not sent again until the user says so.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { FAST_RETRY, Harness, project, waitUntil, type CommandJson, type ThreadJson } from '../helpers/harness.js';
import { unusedPort } from '../helpers/ports.js';

let h: Harness;
afterEach(() => h?.cleanup());

async function completeThreadsPerEpic(): Promise<Record<string, number>> {
  const rows = await h.query<{ target_ref: string }>("SELECT target_ref FROM llm_threads WHERE kind = 'story_generate_epic' AND status = 'complete'");
  const perEpic: Record<string, number> = {};
  for (const r of rows) {
    const epic = JSON.parse(r.target_ref).epic_id as string;
    perEpic[epic] = (perEpic[epic] ?? 0) + 1;
  }
  return perEpic;
}

describe('generate-all and idempotency per epic', () => {
  it('reuses an epic whose request completed instead of paying again; only --force regenerates', async () => {
    h = await Harness.start();
    h.writeConfig(FAST_RETRY);
    await h.importProject(project('p', 5));
    const one = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E1']);
    expect((await h.waitForEnd(one.thread_id)).status).toBe('complete');

    const all = await h.json<CommandJson>(['generate-all', '--project', 'p']);
    expect((await h.waitForEnd(all.thread_id)).status).toBe('complete');
    expect(h.sim.calls.map((c) => c.epic_id).sort()).toEqual(['E1', 'E2', 'E3', 'E4', 'E5']);
    expect(await completeThreadsPerEpic()).toEqual({ E1: 1, E2: 1, E3: 1, E4: 1, E5: 1 });
    const backlog = await h.json<{ epics: { epic_id: string; stories: unknown[] }[] }>(['backlog', 'p']);
    expect(backlog.epics.every((e) => e.stories.length > 0)).toBe(true);

    // Every epic done: a generate-all with nothing to run completes at once, without a call.
    const again = await h.json<CommandJson>(['generate-all', '--project', 'p']);
    expect(again).toMatchObject({ thread_id: all.thread_id, deduplicated: true });
    const forced = await h.json<CommandJson>(['generate-all', '--project', 'p', '--force']);
    expect((await h.waitForEnd(forced.thread_id)).status).toBe('complete');
    expect(h.sim.calls).toHaveLength(10);
  });

  it('after a cancel, running generate-all again pays only for the epics that did not complete', async () => {
    h = await Harness.start();
    h.writeConfig(FAST_RETRY);
    await h.importProject(project('p', 5));
    h.setFaults([
      { kind: 'hang', match: 'Epic id: E4' },
      { kind: 'hang', match: 'Epic id: E5' },
    ]);
    const first = await h.json<CommandJson>(['generate-all', '--project', 'p']);
    await waitUntil(async () => (await h.json<ThreadJson>(['thread', first.thread_id])).child_summary?.complete === 3, 'three epics to complete');
    await waitUntil(() => h.sim.calls.length === 5, 'the two hanging calls');
    await h.json(['cancel', first.thread_id]);
    expect((await h.waitForEnd(first.thread_id)).status).toBe('canceled');
    h.setFaults([]);

    const second = await h.json<CommandJson>(['generate-all', '--project', 'p']);
    expect(second.deduplicated).toBe(false);
    const end = await h.waitForEnd(second.thread_id);
    expect(end.status).toBe('complete');
    expect(end.child_summary).toEqual({ complete: 2 });
    expect(
      h.sim.calls
        .slice(5)
        .map((c) => c.epic_id)
        .sort(),
    ).toEqual(['E4', 'E5']);
    expect(await completeThreadsPerEpic()).toEqual({ E1: 1, E2: 1, E3: 1, E4: 1, E5: 1 });
  });
});

describe('a call that never left', () => {
  it('is released, not counted in doubt: refused port, connection refused, unknown host', async () => {
    h = await Harness.start();
    h.writeConfig(FAST_RETRY);
    await h.importProject(project('p', 1));
    const endpoints = [
      'http://127.0.0.1:9/v1', // a port fetch refuses to connect to at all
      `http://127.0.0.1:${await unusedPort()}/v1`, // ECONNREFUSED
      'http://combine-test-host.invalid/v1', // the name does not resolve
    ];
    for (const url of endpoints) {
      await h.stopDaemon();
      h.env.OPENAI_BASE_URL = url;
      const r = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E1', '--force']);
      const end = await h.waitForEnd(r.thread_id);
      expect(end.status, url).toBe('failed');
      expect(end.usage, url).toMatchObject({ calls: 0, in_doubt_calls: 0, in_doubt_tokens: 0, reserved_calls: 0 });
      const errors = (await h.json<any[]>(['ledger', r.thread_id])).filter((e) => e.entry_type === 'error');
      expect(
        errors.map((e) => e.payload.code),
        url,
      ).toEqual(['PROVIDER_ERROR', 'PROVIDER_ERROR', 'PROVIDER_ERROR']);
      expect(errors[0].payload.message, url).toMatch(/cannot reach the provider \(nothing was sent\)/);
    }
    const charges = await h.query('SELECT status, count(*) AS n FROM llm_charges GROUP BY status');
    expect(charges).toEqual([{ status: 'released', n: 9 }]);
    const usage = await h.json<{ totals: { in_doubt_calls: number; calls: number } }>(['usage']);
    expect(usage.totals).toMatchObject({ calls: 0, in_doubt_calls: 0 });
  });
});

describe('at-most-once: interrupted: hold', () => {
  /** Starts E1's call, which the simulator never answers, and SIGKILLs the daemon while it is in flight. */
  async function crashDuringCall(): Promise<string> {
    h.setFaults([{ kind: 'hang', match: 'Epic id: E1' }]);
    const r = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E1']);
    await waitUntil(() => h.sim.calls.length === 1, 'the call to start');
    await h.killDaemon();
    h.setFaults([]);
    await h.startDaemon();
    return r.thread_id;
  }

  it('does not send a call in flight at a crash again; the thread says it is in doubt; retry pays again', async () => {
    h = await Harness.start();
    h.writeConfig({ ...FAST_RETRY, interrupted: 'hold' });
    await h.importProject(project('p', 1));
    const id = await crashDuringCall();
    const end = await h.waitForEnd(id);
    expect(end.status).toBe('failed');
    const t = await h.json<any>(['thread', id]);
    expect(t.in_doubt).toMatchObject({ code: 'INTERRUPTED', attempt: 1 });
    expect(t.in_doubt.message).toContain(`combine retry ${id}`);
    expect(await h.query('SELECT status, error_code FROM llm_work_items WHERE thread_id = ?', [id])).toEqual([{ status: 'failed', error_code: 'INTERRUPTED' }]);
    expect(t.usage).toMatchObject({ in_doubt_calls: 1, calls: 1 });
    const errors = (await h.json<any[]>(['ledger', id])).filter((e) => e.entry_type === 'error');
    expect(errors).toEqual([expect.objectContaining({ payload: expect.objectContaining({ code: 'INTERRUPTED', next: 'hold', in_doubt: true }) })]);
    // Nothing is sent again, even after the recovery scan has had time to run.
    await new Promise((r) => setTimeout(r, 1000));
    expect(h.sim.calls).toHaveLength(1);
    expect((await h.json<{ checks: Record<string, boolean> }>(['health'])).checks.recovery_scan_done).toBe(true);

    await h.json(['retry', id]);
    expect((await h.waitForEnd(id)).status).toBe('complete');
    expect(h.sim.calls).toHaveLength(2);
    expect((await h.json<any>(['thread', id])).in_doubt).toBeNull();
  });

  it('per operation: operations.<name>.interrupted = hold; cancel gives the held call up', async () => {
    h = await Harness.start();
    h.writeConfig({ ...FAST_RETRY, operations: { story_generate_epic: { interrupted: 'hold' } } });
    await h.importProject(project('p', 1));
    const id = await crashDuringCall();
    expect((await h.waitForEnd(id)).status).toBe('failed');
    const canceled = await h.json<ThreadJson>(['cancel', id]);
    expect(canceled.status).toBe('canceled');
    expect((await h.json<any>(['thread', id])).in_doubt).toBeNull();
    expect(h.sim.calls).toHaveLength(1);
    // Still counted: the provider may have billed it.
    expect((await h.json<{ totals: { in_doubt_calls: number } }>(['usage'])).totals.in_doubt_calls).toBe(1);
  });
});
