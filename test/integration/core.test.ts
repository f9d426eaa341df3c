/**
 * The happy path of issue 2 against the real daemon: idempotent generate-epic, follow, the backlog,
 * the ledger order and hash chain, --force.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Harness, project, type CommandJson, type ThreadJson } from '../helpers/harness.js';

describe('generate-epic end to end', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await Harness.start({ latencyMs: 300 });
    await h.importProject(project('shop', 2));
  });
  afterAll(() => h.cleanup());

  it('runs one thread and one provider call for a double submit, and applies the stories', async () => {
    const first = await h.json<CommandJson>(['generate-epic', '--project', 'shop', '--epic', 'E1']);
    const second = await h.json<CommandJson>(['generate-epic', '--project', 'shop', '--epic', 'E1']);
    expect(first.deduplicated).toBe(false);
    expect(second).toEqual({ thread_id: first.thread_id, status: second.status, deduplicated: true });

    const follow = await h.cli(['thread', first.thread_id, '--follow', '--json']);
    expect(follow.code).toBe(0);
    const lines = follow.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    const final = lines[lines.length - 1] as ThreadJson;
    expect(final).toMatchObject({ thread_id: first.thread_id, kind: 'story_generate_epic', status: 'complete', child_summary: null });
    expect(final.closed_at).not.toBeNull();
    expect(Object.keys(final).sort()).toEqual(
      ['child_summary', 'closed_at', 'created_at', 'kind', 'parent_thread_id', 'status', 'target_ref', 'thread_id', 'usage'].sort(),
    );
    // One paid call, applied: its tokens are the thread's, nothing wasted.
    expect(final.usage).toMatchObject({ calls: 1, wasted_calls: 0, in_doubt_calls: 0 });
    expect(final.usage.total_tokens).toBeGreaterThan(0);
    expect(h.sim.calls.filter((c) => c.epic_id === 'E1')).toHaveLength(1);

    const backlog = await h.json(['backlog', 'shop']);
    const e1 = backlog.epics.find((e: { epic_id: string }) => e.epic_id === 'E1');
    expect(e1.stories.length).toBeGreaterThanOrEqual(3);
    expect(e1.stories[0]).toHaveProperty('acceptance_criteria');
    // Extra fields the model sent are kept.
    expect(e1.stories[0]).toHaveProperty('estimate_points');
    expect(backlog.epics.find((e: { epic_id: string }) => e.epic_id === 'E2').stories).toEqual([]);

    const human = await h.cli(['backlog', 'shop']);
    expect(human.stdout).toContain(e1.stories[0].title);
  });

  it('records prompt → response → parse_report → mutation_report, chained by hashes', async () => {
    const threads = await h.json<ThreadJson[]>(['threads', '--project', 'shop']);
    const ledger = await h.json<any[]>(['ledger', threads[0]!.thread_id]);
    expect(ledger.map((e) => e.entry_type)).toEqual(['prompt', 'response', 'parse_report', 'mutation_report']);
    for (let i = 1; i < ledger.length; i++) {
      expect(ledger[i].seq).toBe(ledger[i - 1].seq + 1);
      expect(ledger[i].prev_hash).toBe(ledger[i - 1].hash);
    }
    expect(ledger[0].payload.request.messages[1].content).toContain('Epic id: E1');
    expect(ledger[1].payload.usage.prompt_tokens).toBeGreaterThan(0);
    expect(ledger[1].payload.request_id).toMatch(/^sim-req-/);
    expect(ledger[3].payload).toMatchObject({ doc_type: 'story_backlog', to_version: ledger[3].payload.from_version + 1 });
    const verify = await h.cli(['ledger', 'verify', '--json']);
    expect(verify.code).toBe(0);
    expect(JSON.parse(verify.stdout)).toMatchObject({ ok: true, first_break: null });
  });

  it('treats a completed request as done, and --force as a new thread and a new call', async () => {
    const [done] = await h.json<ThreadJson[]>(['threads', '--project', 'shop']);
    const again = await h.json<CommandJson>(['generate-epic', '--project', 'shop', '--epic', 'E1']);
    expect(again).toEqual({ thread_id: done!.thread_id, status: 'complete', deduplicated: true });
    expect(h.sim.calls.filter((c) => c.epic_id === 'E1')).toHaveLength(1);

    const forced = await h.json<CommandJson>(['generate-epic', '--project', 'shop', '--epic', 'E1', '--force']);
    expect(forced.deduplicated).toBe(false);
    expect(forced.thread_id).not.toBe(done!.thread_id);
    expect((await h.waitForEnd(forced.thread_id)).status).toBe('complete');
    expect(h.sim.calls.filter((c) => c.epic_id === 'E1')).toHaveLength(2);
  });

  it('refuses bad input with exit 2 and a message naming the problem, storing nothing', async () => {
    const missing = await h.cli(['generate-epic', '--project', 'shop', '--epic', 'NOPE']);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('no epic "NOPE"');
    const noProject = await h.cli(['backlog', 'nope']);
    expect(noProject.code).toBe(2);
    const usage = await h.cli(['generate-epic', '--project', 'shop']);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('--epic');
    const unknownThread = await h.cli(['thread', 'no-such-thread']);
    expect(unknownThread.code).toBe(2);
  });
});
