/** generate-all: one child per epic, continue on error, parent closed with child_summary. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Harness, project, waitUntil, type CommandJson, type ThreadJson } from '../helpers/harness.js';

describe('generate-all over 5 epics with one schema-invalid answer', () => {
  let h: Harness;
  let parent: CommandJson;
  let lines: any[];
  beforeAll(async () => {
    h = await Harness.start({ latencyMs: 50, faults: [{ kind: 'schema_invalid', match: 'Epic id: E3' }] });
    await h.importProject(project('big', 5));
    const r = await h.cli(['generate-all', '--project', 'big', '--follow', '--json']);
    expect(r.code, r.stderr).toBe(1); // a followed thread that ends failed exits 1
    lines = r.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    parent = lines[0];
  });
  afterAll(() => h.cleanup());

  it('streams JSON lines and ends with the parent thread failed, 4 children complete and 1 failed', () => {
    expect(parent).toMatchObject({ status: 'open', deduplicated: false });
    const final = lines[lines.length - 1] as ThreadJson;
    expect(final).toMatchObject({ thread_id: parent.thread_id, kind: 'story_generate_all', status: 'failed' });
    expect(final.child_summary).toEqual({ complete: 4, failed: 1 });
    expect(lines.some((l) => l.event === 'thread' && l.parent_thread_id === parent.thread_id)).toBe(true);
  });

  it('dead-letters the bad epic with SCHEMA_INVALID and keeps the validation errors in its ledger', async () => {
    const children = (await h.json<ThreadJson[]>(['threads', '--project', 'big'])).filter((t) => t.parent_thread_id === parent.thread_id);
    expect(children).toHaveLength(5);
    const bad = children.find((c) => c.target_ref.epic_id === 'E3')!;
    expect(bad.status).toBe('failed');
    const detail = await h.json(['thread', bad.thread_id]);
    expect(detail.status).toBe('failed');
    const item = await h.queryOne('SELECT status, error_code FROM llm_work_items WHERE thread_id = ?', [bad.thread_id]);
    expect(item).toEqual({ status: 'dead_letter', error_code: 'SCHEMA_INVALID' });
    const ledger = await h.json<any[]>(['ledger', bad.thread_id]);
    const reports = ledger.filter((e) => e.entry_type === 'parse_report');
    expect(reports.length).toBeGreaterThanOrEqual(1);
    expect(reports.every((r) => r.payload.ok === false)).toBe(true);
    expect(reports[0].payload.errors.join('\n')).toMatch(/description|acceptance_criteria/);
    expect(ledger[ledger.length - 1]).toMatchObject({ entry_type: 'error', payload: { code: 'SCHEMA_INVALID', next: 'dead_letter' } });
  });

  it('applied the four good epics to the backlog and left the bad one empty', async () => {
    const backlog = await h.json(['backlog', 'big']);
    const counts = Object.fromEntries(backlog.epics.map((e: any) => [e.epic_id, e.stories.length]));
    expect(counts.E3).toBe(0);
    for (const id of ['E1', 'E2', 'E4', 'E5']) expect(counts[id]).toBeGreaterThan(0);
    expect(h.sim.calls.filter((c) => c.epic_id !== 'E3')).toHaveLength(4);
  });

  it('deduplicates a second generate-all while active and treats a finished one by its status', async () => {
    // The finished run failed, so a new request starts a new orchestration (idempotency only returns active or complete).
    // It runs only the epic that did not complete (E3), whose call is held so the second request finds it
    // active, then answered well this time.
    h.sim.setFaults([{ kind: 'hold', match: 'Epic id: E3', times: 1 }]);
    const again = await h.json<CommandJson>(['generate-all', '--project', 'big']);
    expect(again.deduplicated).toBe(false);
    const dup = await h.json<CommandJson>(['generate-all', '--project', 'big']);
    expect(dup).toMatchObject({ thread_id: again.thread_id, deduplicated: true });
    await waitUntil(() => h.sim.release() === 1, 'E3’s held call to be released');
    const end = await h.waitForEnd(again.thread_id);
    expect(end.child_summary).toEqual({ complete: 1 });
  });
});

describe('generate-all adopts an epic already being generated', () => {
  it('does not pay twice for an epic whose single run is in flight', async () => {
    // E2's single run is held in flight until the generate-all has been submitted.
    const h = await Harness.start({ faults: [{ kind: 'hold', match: 'Epic id: E2', times: 1 }] });
    try {
      await h.importProject(project('adopt', 3));
      const single = await h.json<CommandJson>(['generate-epic', '--project', 'adopt', '--epic', 'E2']);
      await waitUntil(() => h.sim.calls.length === 1, 'E2’s call to be in flight');
      const all = await h.json<CommandJson>(['generate-all', '--project', 'adopt']);
      expect(h.sim.release()).toBe(1);
      const final = await h.waitForEnd(all.thread_id);
      expect(final.status).toBe('complete');
      expect(final.child_summary).toEqual({ complete: 3 });
      const adopted = await h.json<ThreadJson>(['thread', single.thread_id]);
      expect(adopted.parent_thread_id).toBe(all.thread_id);
      expect(h.sim.calls.filter((c) => c.epic_id === 'E2')).toHaveLength(1);
      expect(h.sim.calls).toHaveLength(3);
    } finally {
      await h.cleanup();
    }
  });
});
