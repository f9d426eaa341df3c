/**
 * Lease-then-LLM crash recovery with the real daemon: a winner killed between claim and finalize
 * leaves a `pending` run that a later tick re-claims after the stale window (by rewriting its stamp)
 * and completes. No period gets two briefings, and the run's usage is recorded once.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { FAST_RETRY, Harness, project, waitForExit, waitUntil } from '../helpers/harness.js';

let h: Harness;
afterEach(() => h?.cleanup());

/** A daily 6-field cron that next fires about two seconds from now, and that fire time. */
function cronFiringSoon(): { cron: string; fireAt: number } {
  const fireAt = Math.ceil((Date.now() + 2000) / 1000) * 1000;
  const d = new Date(fireAt);
  return { cron: `${d.getUTCSeconds()} ${d.getUTCMinutes()} ${d.getUTCHours()} * * *`, fireAt };
}

async function runs(scheduleId: string): Promise<any[]> {
  return h.json<any[]>(['schedule', 'runs', scheduleId]);
}

async function crashDuringScheduledBriefing(point: string, simLatencyMs = 0) {
  h = await Harness.start({ latencyMs: simLatencyMs });
  h.writeConfig({ ...FAST_RETRY, scheduler: { stale_after: '1s' } });
  await h.importProject(project('p', 2));
  await h.stopDaemon();
  const pid = await h.startDaemon({ COMBINE_CRASH_AT: point });
  const { cron, fireAt } = cronFiringSoon();
  const schedule = await h.json(['schedule', 'add', '--project', 'p', '--operation', 'briefing', '--cron', cron]);
  await waitForExit(pid, 20_000); // the daemon kills itself at the crash point
  expect(h.logText()).toContain(`"point":"${point}"`);

  const leftBehind = await h.query<any>('SELECT * FROM schedule_runs');
  expect(leftBehind).toHaveLength(1);
  expect(leftBehind[0]).toMatchObject({ status: 'pending', claims: 1, period_at: fireAt });
  const callsBeforeRestart = h.sim.calls.length;

  await h.startDaemon();
  const [final] = await waitUntil(
    async () => {
      const list = await runs(schedule.schedule_id);
      return list.length === 1 && list[0].status !== 'pending' ? list : null;
    },
    'the run to be finalized',
    45_000,
  ); // a restart, a stale window and a retried 1.5 s call: slow on a loaded 2-core CI machine
  const date = new Date(fireAt).toISOString().slice(0, 10);
  const docs = await h.query<any>("SELECT * FROM documents WHERE project_id = 'p' AND doc_type = 'briefing'");
  const mutations = await h.query<any>("SELECT m.* FROM mutations m JOIN documents d ON d.id = m.document_id WHERE d.doc_type = 'briefing'");
  const threads = await h.query<any>("SELECT * FROM llm_threads WHERE kind = 'project_briefing'");
  const responses = await h.query<{ payload: string }>("SELECT payload FROM llm_ledger_entries WHERE entry_type = 'response'");
  return { final, leftBehind: leftBehind[0], callsBeforeRestart, date, docs, mutations, threads, responses };
}

describe('scheduled run crash recovery', () => {
  it('after_schedule_claim: the pending run is re-claimed after the stale window and completes once', async () => {
    const x = await crashDuringScheduledBriefing('after_schedule_claim');
    expect(x.leftBehind.thread_id).toBeNull(); // claimed, nothing started, nothing paid
    expect(x.callsBeforeRestart).toBe(0);
    expect(x.final).toMatchObject({ status: 'complete', ready: true, claims: 2, thread_status: 'complete' });
    expect(Date.parse(x.final.claimed_at)).toBeGreaterThan(x.leftBehind.claimed_at);
    expect(h.logText()).toContain('re-claimed a stale pending schedule run');
    // One provider call, one thread, one briefing (version 1) for the period's date.
    expect(h.sim.calls).toHaveLength(1);
    expect(h.sim.calls[0]).toMatchObject({ operation: 'project_briefing', briefing_date: x.date });
    expect(x.threads).toHaveLength(1);
    expect(x.docs).toHaveLength(1);
    expect(x.docs[0]).toMatchObject({ doc_key: x.date, version: 1 });
    expect(x.mutations).toHaveLength(1);
    // Usage recorded once, equal to what the provider reported.
    const usage = JSON.parse(x.responses[0]!.payload).usage;
    expect(x.final.usage).toEqual({ responses: 1, ...usage });

    const briefing = await h.json(['briefing', 'p', '--date', x.date]);
    expect(briefing).toMatchObject({ project_id: 'p', date: x.date, version: 1, thread_id: x.final.thread_id });
    expect(briefing.briefing.next_steps).toContain('Generate the stories of "Epic number 1"');
    expect(await h.json(['ledger', 'verify'])).toMatchObject({ ok: true, first_break: null, incomplete: [] });
  });

  it('during_call: the run keeps its one thread; the engine retries the call in doubt; one briefing', async () => {
    const x = await crashDuringScheduledBriefing('during_call', 1500);
    expect(x.leftBehind.thread_id).not.toBeNull(); // the thread had started: a re-claim must not start another
    expect(x.callsBeforeRestart).toBe(1);
    expect(x.final).toMatchObject({ status: 'complete', thread_id: x.leftBehind.thread_id, thread_status: 'complete' });
    expect(x.threads).toHaveLength(1);
    expect(h.sim.calls).toHaveLength(2); // the interrupted call (maybe paid) and its retry
    expect(x.docs).toHaveLength(1);
    expect(x.docs[0]).toMatchObject({ doc_key: x.date, version: 1 });
    expect(x.mutations).toHaveLength(1);
    // Only the answered call has a recorded response; usage counts it once.
    expect(x.responses).toHaveLength(1);
    expect(x.final.usage.responses).toBe(1);
    expect(x.final.usage.total_tokens).toBe(JSON.parse(x.responses[0]!.payload).usage.total_tokens);
  });
});
