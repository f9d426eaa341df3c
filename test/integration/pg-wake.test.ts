/**
 * Wake-ups and `--follow` across daemons on one Postgres (issue 18): a command acknowledged by daemon A
 * wakes daemon B's producer through LISTEN/NOTIFY, and a `--follow` on A streams the progress B writes.
 * Both daemons run with `max_in_flight` 1 and a recovery scan (their only periodic look at the queue)
 * an hour apart, so the second of two slow calls can only start at once if B was notified.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { type CommandJson, Harness, project, type ThreadJson, waitUntil } from '../helpers/harness.js';
import { MoreDaemons } from '../helpers/more-daemons.js';

let h: Harness;
let more: MoreDaemons | null = null;
afterEach(async () => {
  await more?.cleanup();
  await h?.cleanup();
});

const ENGINE = { engine: { max_in_flight: 1, recovery_interval: '1h' } };

describe('two daemons on one Postgres', () => {
  it('work acknowledged by A starts on B at once, and --follow on A shows B’s progress to the end', async () => {
    // Every call takes 5 s: while the first is unanswered, a second can only be running on the other daemon.
    h = await Harness.start({ faults: [{ kind: 'hang', hang_ms: 5000 }] });
    more = new MoreDaemons(h);
    h.writeConfig(ENGINE);
    await h.startDaemon();
    const b = await more.start(ENGINE);
    await h.importProject(project('shop', 2));

    // Both commands go to A, which can run one call at a time.
    const e1 = await h.json<CommandJson>(['generate-epic', '--project', 'shop', '--epic', 'E1']);
    const e2 = await h.json<CommandJson>(['generate-epic', '--project', 'shop', '--epic', 'E2']);
    const calls = await waitUntil(() => (h.sim.calls.length >= 2 ? h.sim.calls.slice() : null), 'two calls', 30_000);
    // Both calls were in flight together: one daemon each, so B claimed one without waiting for A.
    expect(calls.map((c) => c.epic_id).sort()).toEqual(['E1', 'E2']);
    expect(calls.map((c) => c.status)).toEqual([null, null]);

    // --follow on A: one of the two threads is B's, whose events A learns only from the database.
    const [f1, f2] = await Promise.all([e1, e2].map((c) => h.cli(['thread', c.thread_id, '--follow', '--json'])));
    for (const f of [f1!, f2!]) {
      expect(f.code).toBe(0);
      const lines = f.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l));
      expect(lines.some((m) => m.event === 'ledger' && m.entry_type === 'response')).toBe(true);
      expect((lines.at(-1) as ThreadJson).status).toBe('complete');
    }
    // B's view is the same: one database.
    const fromB = await h.json<ThreadJson[]>(['threads', '--project', 'shop'], b.opts);
    expect(fromB.map((t) => t.status)).toEqual(['complete', 'complete']);
    expect(h.sim.calls).toHaveLength(2);
  });
});
