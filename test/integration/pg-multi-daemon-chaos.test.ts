/**
 * Chaos on Postgres (issue 18's acceptance): three daemons, each with its own COMBINE_HOME, on one
 * database; a generate-all over 200 epics against a simulator failing 20% of calls with transient faults;
 * a random daemon SIGKILLed every 1–3 s for 10 rounds and restarted. Then every child has ended, none is
 * lost, no mutation was applied twice, the paid calls made again are at most the calls in flight at the
 * kills, and the ledger verifies from every daemon. Postgres project only (vitest.config.ts).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { daemonOwner } from '../../src/daemon/runtime/owner.js';
import { DaemonGroup } from '../helpers/daemons.js';
import { type CommandJson, project, waitUntil } from '../helpers/harness.js';
import { seededRandom } from '../helpers/seeded.js';

let g: DaemonGroup;
afterEach(() => g?.cleanup());

const EPICS = 200;
const TERMINAL = ['complete', 'failed', 'dead_letter', 'canceled', 'superseded'];

describe('chaos: three daemons on one Postgres', () => {
  it('200 epics, 20% provider faults, a random daemon SIGKILLed every 1–3 s for 10 rounds: nothing lost, nothing applied or paid twice', async () => {
    g = await DaemonGroup.start(3, { latencyMs: 1200, faultRate: 0.2, seed: 18 });
    // Short leases and scans (a dead daemon's items are someone else's within seconds); retries and
    // repairs enough that the simulator's faults (invalid answers included) rarely exhaust an item.
    g.writeConfig({
      retry: { base: '50ms', cap: '300ms', max_attempts: 8, repair_attempts: 3 },
      engine: { max_in_flight: 4, lease: '4s', recovery_interval: '500ms' },
    });
    await g.startAll();
    const { first: a, sim } = g;
    await a.importProject(project('p', EPICS));
    const all = await a.json<CommandJson>(['generate-all', '--project', 'p']);

    const random = seededRandom(18); // the same kill schedule on every run
    let inFlightAtKills = 0;
    let kills = 0;
    for (let round = 0; round < 10; round++) {
      await new Promise((r) => setTimeout(r, 1000 + random() * 2000));
      const victim = g.members[Math.floor(random() * g.members.length)]!;
      await victim.killDaemon();
      kills++;
      // What the dead process had started: its items running (a prompt recorded, the call perhaps sent)
      // are still leased by it — its home restarts below, other daemons wait for the lease to expire.
      const { homePrefix } = daemonOwner(victim.home);
      const running = await a.queryOne<{ n: number }>(
        "SELECT count(*) AS n FROM llm_work_items WHERE status = 'running' AND substr(lease_owner, 1, length(@p)) = @p",
        { p: homePrefix },
      );
      inFlightAtKills += running!.n;
      await victim.startDaemon();
    }
    expect(kills).toBe(10);

    const parent = await waitUntil(
      async () => {
        const row = await a.queryOne<{ status: string }>('SELECT status FROM llm_threads WHERE id = ?', [all.thread_id]);
        return row && TERMINAL.includes(row.status) ? row : null;
      },
      'the generate-all to end',
      150_000,
    );

    // Every child ended; each one is either applied once or ended with its reason, none lost.
    const children = await a.query<{ id: string; status: string; epic: string; mutations: number; items_open: number }>(
      `SELECT t.id, t.status, t.target_ref AS epic,
         (SELECT count(*) FROM mutations m WHERE m.thread_id = t.id) AS mutations,
         (SELECT count(*) FROM llm_work_items w WHERE w.thread_id = t.id AND w.status IN ('queued', 'claimed', 'running')) AS items_open
       FROM llm_threads t WHERE t.parent_thread_id = ?`,
      [all.thread_id],
    );
    expect(children).toHaveLength(EPICS);
    expect(children.filter((c) => !TERMINAL.includes(c.status))).toEqual([]);
    expect(children.filter((c) => c.items_open > 0)).toEqual([]);
    expect(children.filter((c) => c.status === 'complete' && c.mutations !== 1)).toEqual([]);
    expect(children.filter((c) => c.status !== 'complete' && c.mutations !== 0)).toEqual([]);
    const complete = children.filter((c) => c.status === 'complete').length;
    const reasons = await a.query<{ status: string; error_code: string | null; n: number }>(
      `SELECT w.status, w.error_code, count(*) AS n FROM llm_work_items w JOIN llm_threads t ON t.id = w.thread_id
       WHERE t.parent_thread_id = ? AND w.status <> 'applied' GROUP BY w.status, w.error_code`,
      [all.thread_id],
    );
    // An item that did not apply ended for a reason the simulator's faults explain (invalid answers past
    // the repairs), never stuck or dropped by a kill.
    expect(reasons.filter((r) => r.status !== 'dead_letter' || r.error_code !== 'SCHEMA_INVALID')).toEqual([]);
    expect(complete).toBeGreaterThanOrEqual(EPICS * 0.95);
    expect(parent.status).toBe(complete === EPICS ? 'complete' : 'failed');
    // No epic's mutation was applied twice, across all threads: one per completed epic.
    const perEpic = await a.query<{ n: number }>(
      `SELECT count(*) AS n FROM mutations m JOIN llm_threads t ON t.id = m.thread_id
       WHERE t.parent_thread_id = ? GROUP BY t.target_ref HAVING count(*) > 1`,
      [all.thread_id],
    );
    expect(perEpic).toEqual([]);
    const backlog = await a.json<{ epics: { epic_id: string; stories: unknown[] }[] }>(['backlog', 'p']);
    expect(backlog.epics.filter((e) => e.stories.length > 0)).toHaveLength(complete);

    // Paid twice: an epic answered successfully more than once. Only a call whose answer a killed daemon
    // never recorded is sent again, so at most the calls in flight at the kills.
    const successes = new Map<string, number>();
    for (const c of sim.calls) if (c.status === 200 && c.fault === null && c.epic_id) successes.set(c.epic_id, (successes.get(c.epic_id) ?? 0) + 1);
    const paidAgain = [...successes.values()].reduce((n, k) => n + k - 1, 0);
    expect(paidAgain).toBeLessThanOrEqual(inFlightAtKills);
    expect(successes.size).toBeGreaterThanOrEqual(complete);

    // The ledger is one verifiable chain, whichever daemon checks it.
    for (const h of g.members) expect(await h.json(['ledger', 'verify'])).toMatchObject({ ok: true, first_break: null, incomplete: [] });
    expect((await a.queryOne<{ n: number }>('SELECT count(*) AS n FROM locks'))!.n).toBe(0);
    // Every move in or out of `queued` (kills, requeues, retries, takeovers) reached the queue depth.
    const depth = await a.queueDepth();
    expect(depth.kept).toBe(depth.queued);
    console.log(
      `chaos: ${sim.calls.length} calls, ${complete}/${EPICS} complete, ${kills} kills, ${inFlightAtKills} in flight at the kills, ${paidAgain} paid again`,
    );
  }, 300_000);
});
