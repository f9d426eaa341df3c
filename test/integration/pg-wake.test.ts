/**
 * Wake-ups and `--follow` across daemons on one Postgres (issue 18): a command acknowledged by daemon A
 * wakes daemon B's producer through LISTEN/NOTIFY, and a `--follow` on A streams the progress B writes.
 * Both daemons run with `max_in_flight` 1 and a recovery scan (their only periodic look at the queue)
 * an hour apart, so the second of two slow calls can only start at once if B was notified. A daemon
 * listens to the other daemons' thread changes only while it has a follower: a follower's first change
 * from another daemon, committed right after its snapshot, reaches it.
 */
import { spawn } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { daemonOwner } from '../../src/daemon/runtime/owner.js';
import { DaemonGroup } from '../helpers/daemons.js';
import { CLI, type CommandJson, Harness, project, type ThreadJson, waitUntil } from '../helpers/harness.js';
import { MoreDaemons } from '../helpers/more-daemons.js';

let harness: Harness | undefined;
let more: MoreDaemons | null = null;
let g: DaemonGroup | undefined;
afterEach(async () => {
  await more?.cleanup();
  await harness?.cleanup();
  await g?.cleanup();
  [harness, more, g] = [undefined, null, undefined];
});

/**
 * `thread <id> --follow --json` on `daemon`, read as it prints: `acknowledged` once its first line (the
 * snapshot, read after the daemon subscribed to others' changes) is out; `lines` at its end.
 */
function followAsItPrints(daemon: Harness, threadId: string): { acknowledged: Promise<void>; lines: Promise<Record<string, unknown>[]> } {
  const child = spawn(process.execPath, [CLI, 'thread', threadId, '--follow', '--json'], { env: daemon.env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let acknowledge: () => void = () => {};
  const acknowledged = new Promise<void>((resolve) => (acknowledge = resolve));
  child.stdout.on('data', (d) => {
    out += d;
    if (out.includes('\n')) acknowledge();
  });
  const lines = new Promise<Record<string, unknown>[]>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) reject(new Error(`follow exited ${code}`));
      else
        resolve(
          out
            .trim()
            .split('\n')
            .map((l) => JSON.parse(l)),
        );
    });
  });
  return { acknowledged, lines };
}

const ENGINE = { engine: { max_in_flight: 1, recovery_interval: '1h' } };

describe('two daemons on one Postgres', () => {
  it('work acknowledged by A starts on B at once, and --follow on A shows B’s progress to the end', async () => {
    // Every call takes 5 s: while the first is unanswered, a second can only be running on the other daemon.
    const h = await Harness.start({ faults: [{ kind: 'hang', hang_ms: 5000 }] });
    harness = h;
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

  it('a follower on one daemon sees the first change the other daemon commits after it subscribed, again once its last follower left', async () => {
    // Every call is held until released: the thread changes exactly when the test says.
    g = await DaemonGroup.start(2, { faults: [{ kind: 'hold' }] });
    g.writeConfig(ENGINE);
    await g.startAll();
    const [a, b] = g.members as [Harness, Harness];
    await a.importProject(project('shop', 2));
    for (const epic of ['E1', 'E2']) {
      const run = await a.json<CommandJson>(['generate-epic', '--project', 'shop', '--epic', epic]);
      await waitUntil(() => g!.sim.calls.some((c) => c.epic_id === epic), `the call of ${epic} to start`);
      // The follower goes to the daemon that does not run the call: it learns of the answer only from the database.
      const lease = await a.queryOne<{ lease_owner: string }>('SELECT lease_owner FROM llm_work_items WHERE thread_id = ?', [run.thread_id]);
      const follower = lease!.lease_owner.startsWith(daemonOwner(a.home).homePrefix) ? b : a;
      const follow = followAsItPrints(follower, run.thread_id);
      await follow.acknowledged;
      // The first change after the snapshot (before it: the prompt): the answer, recorded and applied by the other daemon.
      expect(g.sim.release()).toBe(1);
      const lines = await follow.lines;
      expect(lines.some((m) => m.event === 'ledger' && m.entry_type === 'response')).toBe(true);
      expect((lines.at(-1) as unknown as ThreadJson).status).toBe('complete');
    }
  });
});
