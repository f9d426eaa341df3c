/**
 * Crash tests: COMBINE_CRASH_AT makes the daemon SIGKILL itself at one point of the pipeline. After a
 * restart every thread ends, a recorded response is never paid for again, the mutation is applied
 * exactly once, and the ledger verifies.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { FAST_RETRY, Harness, project, waitForExit, type CommandJson } from '../helpers/harness.js';

let h: Harness;
afterEach(() => h?.cleanup());

async function crashAndRecover(point: string, simLatencyMs = 0) {
  h = await Harness.start({ latencyMs: simLatencyMs });
  h.writeConfig(FAST_RETRY);
  await h.importProject(project('p', 1));
  await h.stopDaemon();
  const pid = await h.startDaemon({ COMBINE_CRASH_AT: point });
  const r = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E1']);
  await waitForExit(pid); // the daemon kills itself at the crash point
  expect(h.logText()).toContain(`"point":"${point}"`);
  const callsBeforeRestart = h.sim.calls.length;
  await h.startDaemon();
  const final = await h.waitForEnd(r.thread_id);
  const ledger = await h.json<any[]>(['ledger', r.thread_id]);
  const verify = await h.json(['ledger', 'verify']);
  const mutations = await h.queryOne<{ n: number }>('SELECT count(*) AS n FROM mutations WHERE thread_id = ?', [r.thread_id]);
  const doc = await h.queryOne<{ version: number }>("SELECT version FROM documents WHERE project_id = 'p' AND doc_type = 'story_backlog'");
  const locks = await h.queryOne<{ n: number }>('SELECT count(*) AS n FROM locks');
  return { final, ledger, verify, mutations: mutations!.n, docVersion: doc!.version, locks: locks!.n, callsBeforeRestart };
}

function expectRecovered(x: Awaited<ReturnType<typeof crashAndRecover>>) {
  expect(x.final.status).toBe('complete');
  expect(x.mutations).toBe(1);
  expect(x.docVersion).toBe(2); // created at v1, exactly one mutation
  expect(x.locks).toBe(0);
  expect(x.verify).toMatchObject({ ok: true, first_break: null, incomplete: [] });
  expect(x.ledger.filter((e) => e.entry_type === 'mutation_report')).toHaveLength(1);
}

describe('crash recovery', () => {
  it('after_claim: nothing was sent; the claim is released and the item runs once', async () => {
    const x = await crashAndRecover('after_claim');
    expectRecovered(x);
    expect(x.callsBeforeRestart).toBe(0);
    expect(h.sim.calls).toHaveLength(1);
    expect(x.ledger.map((e) => e.entry_type)).toEqual(['prompt', 'response', 'parse_report', 'mutation_report']);
  });

  it('during_call: the call in doubt is recorded INTERRUPTED and retried', async () => {
    const x = await crashAndRecover('during_call', 1500);
    expectRecovered(x);
    expect(x.callsBeforeRestart).toBe(1);
    expect(h.sim.calls).toHaveLength(2); // the in-doubt call may have been paid; the retry is the only other
    expect(x.ledger.map((e) => e.entry_type)).toEqual(['prompt', 'error', 'prompt', 'response', 'parse_report', 'mutation_report']);
    expect(x.ledger[1].payload).toMatchObject({ code: 'INTERRUPTED', class: 'transient', next: 'retry' });
  });

  it('after_response: resumes from the recorded response without calling the provider again', async () => {
    const x = await crashAndRecover('after_response');
    expectRecovered(x);
    expect(h.sim.calls).toHaveLength(1);
    expect(x.ledger.map((e) => e.entry_type)).toEqual(['prompt', 'response', 'parse_report', 'mutation_report']);
    expect(x.ledger[2].payload).toMatchObject({ ok: true, resumed: true, response_seq: x.ledger[1].seq });
  });

  it('in_mutation: the half-done transaction rolls back; the mutation is applied exactly once, no new call', async () => {
    const x = await crashAndRecover('in_mutation');
    expectRecovered(x);
    expect(h.sim.calls).toHaveLength(1);
    expect(x.ledger.map((e) => e.entry_type)).toEqual(['prompt', 'response', 'parse_report', 'mutation_report']);
    expect(x.ledger[2].payload.resumed).toBe(true);
  });
});
