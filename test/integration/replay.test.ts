/**
 * `combine replay`: a thread dead-lettered by a validator that was too strict (config
 * `operations.story_generate_epic.validation`) is rescued after the rule is relaxed and the daemon
 * restarted — from the recorded answer, with zero new provider calls.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { simulatedStories } from '../../src/operations/builtin/story_generate_epic/simulate.js';
import { FAST_RETRY, Harness, project, waitForExit, type CommandJson, type ThreadJson } from '../helpers/harness.js';

let h: Harness;
afterEach(() => h?.cleanup());

// One repair (opt-in): the dead-lettered thread then holds two rejected answers.
const strict = (minStories: number) => ({
  ...FAST_RETRY,
  operations: { story_generate_epic: { validation: { min_stories: minStories }, on_invalid: { repair: 1 } } },
});

function paidCalls(): number {
  return h.sim.calls.filter((c) => c.status === 200).length;
}

describe('replay', () => {
  it('rescues a thread dead-lettered by a too-strict validator, with no provider call', async () => {
    h = await Harness.start();
    h.writeConfig(strict(9)); // the simulator writes 3 to 5 stories per epic
    await h.importProject(project('p', 1));
    const r = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E1']);
    expect((await h.waitForEnd(r.thread_id)).status).toBe('failed');
    const callsBefore = paidCalls();
    expect(callsBefore).toBe(2); // the answer and one repair, both rejected by the rule
    const before = await h.json<any[]>(['ledger', r.thread_id]);
    expect(before.filter((e) => e.entry_type === 'error').map((e) => e.payload.code)).toEqual(['SCHEMA_INVALID', 'SCHEMA_INVALID']);
    expect(before.find((e) => e.entry_type === 'parse_report').payload.errors[0]).toMatch(/stories: needs at least 9 stories/);

    // Under the strict rule a replay is still rejected: exit 1, nothing queued.
    const stillStrict = await h.cli(['replay', r.thread_id, '--json']);
    expect(stillStrict.code).toBe(1);
    expect(JSON.parse(stillStrict.stdout)).toMatchObject({ replayed: { ok: false, stage: 'schema' }, applied: null, plan: null });
    const refused = await h.cli(['replay', r.thread_id, '--apply']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("today's validation also rejects");

    // Relax the rule; the restarted daemon reads it.
    await h.stopDaemon();
    h.writeConfig(strict(3));
    const dry = await h.json(['replay', r.thread_id]);
    const expected = simulatedStories('E1', 'Epic number 1').map((s) => s.title);
    expect(dry).toMatchObject({
      thread_id: r.thread_id,
      thread_status: 'failed',
      recorded: { parse_ok: false, applied: false },
      replayed: { ok: true, stories: expected.length },
      plan: { epic_id: 'E1', stories_before: 0, stories_after: expected.length, difference: { added: expected, removed: [], changed: [] } },
      applied: null,
    });
    const human = await h.cli(['replay', r.thread_id]);
    expect(human.stdout).toContain(`+ ${expected[0]}`);
    expect((await h.json(['backlog', 'p'])).epics[0].stories).toEqual([]); // a dry run changes nothing

    const applied = await h.json(['replay', r.thread_id, '--apply']);
    expect(applied.applied).toMatchObject({ sequence: 2, status: 'queued' });
    const final = await h.waitForEnd(r.thread_id);
    expect(final.status).toBe('complete');
    expect(paidCalls()).toBe(callsBefore);
    expect(h.sim.calls).toHaveLength(callsBefore);

    const backlog = await h.json(['backlog', 'p']);
    expect(backlog.epics[0].stories.map((s: { title: string }) => s.title)).toEqual(expected);
    const ledger = await h.json<any[]>(['ledger', r.thread_id]);
    const replayed = ledger.filter((e) => e.work_item_id === applied.applied.work_item_id);
    expect(replayed.map((e) => e.entry_type)).toEqual(['response', 'parse_report', 'mutation_report']);
    expect(replayed[0].payload).toMatchObject({ replay_of: dry.response_seq, usage: null, request_id: null });
    expect(replayed[1].payload).toMatchObject({ ok: true, replay_of: dry.response_seq });
    expect(replayed[2].payload).toMatchObject({ replay_of: dry.response_seq, to_version: 2 });
    expect(replayed[0].summary).toContain('no call');
    const stats = await h.json(['stats']);
    expect(stats.calls).toBe(callsBefore); // telemetry: no call was made for the replay
    expect(await h.json(['ledger', 'verify'])).toMatchObject({ ok: true, first_break: null, incomplete: [] });

    // A complete thread can be inspected but not replayed onto itself again.
    const again = await h.cli(['replay', r.thread_id, '--apply']);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('it is complete');
    const same = await h.json(['replay', r.thread_id]);
    expect(same.recorded).toMatchObject({ parse_ok: true, applied: true });
    expect(same.plan.difference).toMatchObject({ added: [], removed: [], changed: [], unchanged: expected.length });
  });

  it('rescues the failed children of a generate-all and the orchestration closes complete', async () => {
    h = await Harness.start();
    const counts = [1, 2, 3, 4, 5, 6].map((i) => simulatedStories(`E${i}`, `Epic number ${i}`).length);
    const max = Math.max(...counts);
    expect(counts.some((c) => c < max)).toBe(true); // some epics fall short of the strict rule
    h.writeConfig(strict(max));
    await h.importProject(project('p', 6));
    const r = await h.json<CommandJson>(['generate-all', '--project', 'p']);
    const parent = await h.waitForEnd(r.thread_id);
    expect(parent.status).toBe('failed');
    const failed = (await h.json<ThreadJson[]>(['threads', '--project', 'p'])).filter((t) => t.parent_thread_id === r.thread_id && t.status === 'failed');
    expect(failed).toHaveLength(counts.filter((c) => c < max).length);
    const calls = h.sim.calls.length;

    const whole = await h.cli(['replay', r.thread_id]);
    expect(whole.code).toBe(2);
    expect(whole.stderr).toContain('replay one of its children at a time');
    expect(whole.stderr).toContain(failed[0]!.thread_id);

    await h.stopDaemon();
    h.writeConfig(FAST_RETRY);
    for (const t of failed) await h.json(['replay', t.thread_id, '--apply']);
    expect((await h.waitForEnd(r.thread_id)).status).toBe('complete');
    expect(h.sim.calls).toHaveLength(calls);
    const backlog = await h.json(['backlog', 'p']);
    expect(backlog.epics.map((e: { stories: unknown[] }) => e.stories.length)).toEqual(counts);
  });

  it('a replay killed right after its claim or inside its mutation completes after restart, applied once, no call', async () => {
    h = await Harness.start();
    h.writeConfig(strict(9));
    await h.importProject(project('p', 2));
    const threads: string[] = [];
    for (const epic of ['E1', 'E2']) {
      const r = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', epic]);
      expect((await h.waitForEnd(r.thread_id)).status).toBe('failed');
      threads.push(r.thread_id);
    }
    const calls = h.sim.calls.length;
    h.writeConfig(FAST_RETRY);
    for (const [i, point] of (['after_claim', 'in_mutation'] as const).entries()) {
      await h.stopDaemon();
      const pid = await h.startDaemon({ COMBINE_CRASH_AT: point });
      await h.json(['replay', threads[i]!, '--apply', '--no-autostart']);
      await waitForExit(pid);
      expect(h.logText()).toContain(`"point":"${point}"`);
      await h.startDaemon();
      expect((await h.waitForEnd(threads[i]!)).status).toBe('complete');
    }
    expect(h.sim.calls).toHaveLength(calls);
    const mutations = await h.query<{ thread_id: string; n: number }>('SELECT thread_id, count(*) AS n FROM mutations GROUP BY thread_id');
    const byThread = (x: { thread_id: string }, y: { thread_id: string }) => x.thread_id.localeCompare(y.thread_id);
    expect(mutations.sort(byThread)).toEqual(threads.map((t) => ({ thread_id: t, n: 1 })).sort(byThread));
    expect(await h.json(['ledger', 'verify'])).toMatchObject({ ok: true, incomplete: [] });
  });

  it('names what is wrong: unknown thread, a seq that is not a response of the thread', async () => {
    h = await Harness.start();
    await h.importProject(project('p', 1));
    const r = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E1']);
    await h.waitForEnd(r.thread_id);
    const missing = await h.cli(['replay', 'no-such-thread']);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('no thread "no-such-thread"');
    const notResponse = await h.cli(['replay', r.thread_id, '--response', '1']);
    expect(notResponse.code).toBe(2);
    expect(notResponse.stderr).toContain('entry 1 is not a response');
    const badSeq = await h.cli(['replay', r.thread_id, '--response', 'x']);
    expect(badSeq.code).toBe(2);
  });
});
