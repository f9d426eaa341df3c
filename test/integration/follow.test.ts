/**
 * `--follow` misses nothing and repeats nothing (issue 17): a follower that attaches late first gets
 * what already happened, then live events, each ledger entry once.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Harness, project, waitUntil, type CommandJson, type ThreadJson } from '../helpers/harness.js';

interface FollowLine {
  event: string;
  seq?: number;
  entry_type?: string;
  attempt?: number | null;
  history?: boolean;
  thread_id?: string;
  parent_thread_id?: string | null;
  status?: string;
  target_ref?: { epic_id?: string };
}

let h: Harness;
afterEach(() => h?.cleanup());

async function ledgerCount(threadId: string, type: string): Promise<number> {
  return (await h.queryOne<{ n: number }>('SELECT count(*) AS n FROM llm_ledger_entries WHERE thread_id = ? AND entry_type = ?', [threadId, type]))!.n;
}

describe('following a thread that already has 3 attempts', () => {
  it('prints those 3 attempts, then the rest, and every ledger seq exactly once', async () => {
    // Three 500s (each a recorded attempt), then a fourth call that answers after 4 s: the followers
    // attach while it is in flight.
    h = await Harness.start({
      faults: [
        { kind: 'server_error', times: 3 },
        { kind: 'hang', hang_ms: 4000, times: 1 },
      ],
    });
    h.writeConfig({ retry: { base: '50ms', cap: '100ms', max_attempts: 5 } });
    await h.importProject(project('f', 1));
    const r = await h.json<CommandJson>(['generate-epic', '--project', 'f', '--epic', 'E1']);
    await waitUntil(async () => (await ledgerCount(r.thread_id, 'error')) === 3, 'three failed attempts');

    const [json, human] = await Promise.all([h.cli(['thread', r.thread_id, '--follow', '--json']), h.cli(['thread', r.thread_id, '--follow'])]);
    expect(json.code, json.stderr).toBe(0);
    const lines = json.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as FollowLine);
    expect(lines[0]!.event).toBe('snapshot');
    const ledger = lines.filter((l) => l.event === 'ledger');
    const seqs = ledger.map((l) => l.seq!);
    expect(new Set(seqs).size).toBe(seqs.length); // each seq once
    const recorded = await h.json<{ seq: number }[]>(['ledger', r.thread_id]);
    expect([...seqs].sort((a, b) => a - b)).toEqual(recorded.map((e) => e.seq)); // and none missing

    const history = ledger.filter((l) => l.history);
    expect(history.filter((l) => l.entry_type === 'prompt').map((l) => l.attempt)).toEqual(expect.arrayContaining([1, 2, 3]));
    expect(history.filter((l) => l.entry_type === 'error').map((l) => l.attempt)).toEqual([1, 2, 3]);
    expect(ledger.filter((l) => l.entry_type === 'prompt').map((l) => l.attempt)).toEqual([1, 2, 3, 4]);
    expect((lines[lines.length - 1] as unknown as ThreadJson).status).toBe('complete');

    expect(human.code, human.stderr).toBe(0);
    const humanLines = human.stdout.split('\n');
    expect(humanLines.filter((l) => /^\s+\d\d:\d\d:\d\d\s+prompt\b/.test(l))).toHaveLength(4);
    expect(humanLines.filter((l) => /^\s+\d\d:\d\d:\d\d\s+error\b/.test(l))).toHaveLength(3);
    expect(humanLines.filter((l) => /mutation_report/.test(l))).toHaveLength(1);
  });
});

describe('following a generate-all after some children finished', () => {
  it('counts the finished children too: one line per child, from 1/5 to 5/5', async () => {
    h = await Harness.start({ faults: ['E3', 'E4', 'E5'].map((e) => ({ kind: 'hang' as const, match: `Epic id: ${e}`, hang_ms: 2500 })) });
    await h.importProject(project('g', 5));
    const r = await h.json<CommandJson>(['generate-all', '--project', 'g']);
    await waitUntil(async () => (await h.json<ThreadJson[]>(['threads', '--parent', r.thread_id, '--status', 'complete'])).length === 2, 'two children done');

    const follow = await h.cli(['thread', r.thread_id, '--follow']);
    expect(follow.code, follow.stderr).toBe(0);
    const childLines = follow.stdout.split('\n').filter((l) => /epic E\d complete \(\d\/5\)/.test(l));
    expect(childLines.map((l) => /epic (E\d)/.exec(l)![1]).sort()).toEqual(['E1', 'E2', 'E3', 'E4', 'E5']);
    expect(childLines.map((l) => /\((\d)\/5\)/.exec(l)![1])).toEqual(['1', '2', '3', '4', '5']);

    const json = await h.cli(['thread', r.thread_id, '--follow', '--json']);
    const lines = json.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as FollowLine);
    expect(lines[0]).toMatchObject({ event: 'snapshot', history: expect.any(Number) });
    const children = lines.filter((l) => l.event === 'thread' && l.parent_thread_id === r.thread_id && l.history);
    expect(children.map((c) => c.target_ref!.epic_id).sort()).toEqual(['E1', 'E2', 'E3', 'E4', 'E5']);
    const seqs = lines.filter((l) => l.event === 'ledger').map((l) => l.seq);
    expect(new Set(seqs).size).toBe(seqs.length);
    expect(seqs.length).toBe((await h.json<unknown[]>(['ledger', r.thread_id])).length);
  });
});
