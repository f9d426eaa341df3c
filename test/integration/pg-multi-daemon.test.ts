/**
 * Several daemons on one Postgres database (issue 18), each with its own COMBINE_HOME, all on the same
 * database and simulator: a daemon never takes another live daemon's items (recovery takes only expired
 * leases), a dead daemon's items are taken over by a live one once their lease expires, one request sent
 * to two daemons at once makes one thread and one call, and three daemons together spend exactly a
 * project's budget. Postgres project only (vitest.config.ts).
 */
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { PARKED_UNTIL_RAISED } from '../../src/daemon/engine/claim-budget.js';
import { daemonOwner } from '../../src/daemon/runtime/owner.js';
import { DaemonGroup } from '../helpers/daemons.js';
import { FAST_RETRY, type CommandJson, type Harness, project, waitUntil } from '../helpers/harness.js';

let g: DaemonGroup;
afterEach(() => g?.cleanup());

/** Short leases and frequent recovery scans, so a dead daemon's items are taken over within seconds. */
const FAST_RECOVERY = { engine: { lease: '3s', recovery_interval: '250ms' } };

async function health(h: Harness): Promise<{ checks: { recovery_scan_done: boolean } }> {
  return JSON.parse((await h.cli(['health', '--json'])).stdout);
}

/** Thirty epics whose prompts are all the same length (ids E10…E39), so every call costs the same. */
function evenProject(id: string) {
  return {
    id,
    name: `Project ${id}`,
    epics: Array.from({ length: 30 }, (_, i) => ({ id: `E${i + 10}`, title: `Epic number ${i + 10}`, description: `Everything about epic ${i + 10}.` })),
  };
}

/** Stored state is read through the first harness: its database is the one every daemon shares. */
async function threadStatus(h: Harness, id: string): Promise<string | undefined> {
  return (await h.queryOne<{ status: string }>('SELECT status FROM llm_threads WHERE id = ?', [id]))?.status;
}

describe('several daemons on one Postgres', () => {
  it('a daemon starting beside a busy one leaves its live items alone, and takes a dead one’s items when their lease expires', async () => {
    // The first call of E10 and of E11 is held in flight until the test releases it.
    g = await DaemonGroup.start(2, {
      faults: [
        { kind: 'hold', match: 'Epic id: E10', times: 1 },
        { kind: 'hold', match: 'Epic id: E11', times: 1 },
      ],
    });
    g.writeConfig({ ...FAST_RETRY, ...FAST_RECOVERY });
    const [a, b] = g.members as [Harness, Harness];
    await a.startDaemon();
    await a.importProject(evenProject('p'));
    const first = await a.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E10']);
    await waitUntil(() => g.sim.calls.length === 1, 'the call to start on daemon A');

    // B starts and finishes its recovery scan (and a few more) while A's call is still unanswered.
    await b.startDaemon();
    await waitUntil(async () => (await health(b)).checks.recovery_scan_done, 'B’s start-up recovery scan');
    expect(g.sim.calls[0]!.status).toBeNull();
    expect(g.sim.release()).toBe(1);
    await waitUntil(async () => (await threadStatus(a, first.thread_id)) === 'complete', 'the first request to complete', 30_000);
    expect(g.sim.calls).toHaveLength(1); // B never took A's live lease: nothing was interrupted or sent twice
    const firstLedger = await a.json<{ entry_type: string }[]>(['ledger', first.thread_id]);
    expect(firstLedger.map((e) => e.entry_type)).toEqual(['prompt', 'response', 'parse_report', 'mutation_report']);

    // The daemon running the second call dies with it in flight: once its lease expires, the other records
    // INTERRUPTED and sends it again. Either daemon may claim it (a submit to A wakes B too), so the one
    // to kill is read from the lease's owner.
    const second = await a.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E11']);
    await waitUntil(() => g.sim.calls.length === 2, 'the second call to start');
    const lease = await a.queryOne<{ lease_owner: string }>('SELECT lease_owner FROM llm_work_items WHERE thread_id = ?', [second.thread_id]);
    const [busy, survivor] = lease!.lease_owner.startsWith(daemonOwner(a.home).homePrefix) ? [a, b] : [b, a];
    expect(lease!.lease_owner.startsWith(daemonOwner(busy.home).homePrefix)).toBe(true);
    await busy.killDaemon();
    await waitUntil(async () => (await threadStatus(a, second.thread_id)) === 'complete', 'the other daemon to take over and complete the request', 40_000);
    expect(g.sim.calls).toHaveLength(3);
    const ledger = await survivor.json<{ entry_type: string; payload: { code?: string } }[]>(['ledger', second.thread_id]);
    expect(ledger.map((e) => e.entry_type)).toEqual(['prompt', 'error', 'prompt', 'response', 'parse_report', 'mutation_report']);
    expect(ledger[1]!.payload.code).toBe('INTERRUPTED');
    expect(survivor.logText()).toMatch(/"msg":"recovery scan"/);
    expect((await a.queryOne<{ n: number }>('SELECT count(*) AS n FROM mutations WHERE thread_id = ?', [second.thread_id]))!.n).toBe(1);
    expect((await a.queryOne<{ n: number }>('SELECT count(*) AS n FROM locks'))!.n).toBe(0); // the dead owner's lock went with its lease
    expect(await survivor.json(['ledger', 'verify'])).toMatchObject({ ok: true, first_break: null });
  });

  it('the same request sent to two daemons at once makes one thread and one call', async () => {
    g = await DaemonGroup.start(2, { latencyMs: 300 });
    g.writeConfig(FAST_RETRY);
    await g.startAll();
    const [a, b] = g.members as [Harness, Harness];
    await a.importProject(evenProject('p'));
    const args = ['generate-epic', '--project', 'p', '--epic', 'E12'];
    const answers = await Promise.all([a, b, a, b, a, b].map((h) => h.json<CommandJson>(args)));
    const ids = new Set(answers.map((r) => r.thread_id));
    expect(ids.size).toBe(1);
    expect(answers.filter((r) => !r.deduplicated)).toHaveLength(1);
    const [id] = [...ids] as [string];
    await waitUntil(async () => (await threadStatus(a, id)) === 'complete', 'the request to complete', 30_000);
    expect(g.sim.calls).toHaveLength(1);
    expect((await a.queryOne<{ n: number }>("SELECT count(*) AS n FROM llm_threads WHERE kind = 'story_generate_epic'"))!.n).toBe(1);
  });

  it('three daemons together make exactly the calls a project budget fits', async () => {
    g = await DaemonGroup.start(3, { latencyMs: 200 });
    const [a, b] = g.members as [Harness, Harness, Harness];
    // A cost that is a whole number of dollars per prompt token and nothing for the answer: every call
    // of these equal-length prompts costs exactly the same, so "fits 10 calls" is exact.
    const base = { ...FAST_RETRY, provider: { max_tokens: 400 }, prices: { 'test-model': { input_per_million_usd: 1_000_000, output_per_million_usd: 0 } } };
    g.writeConfig(base);
    await a.importProject(evenProject('p'));
    await a.importProject(evenProject('q'));
    // Calibration, one daemon, no budget: the most a call may cost (its reservation) and what it costs.
    const dry = await a.json<{ calls: number; estimated_max_cost: number }>(['generate-all', '--project', 'p', '--dry-run']);
    const reserved = dry.estimated_max_cost / dry.calls;
    expect(Number.isInteger(reserved)).toBe(true); // every epic's call reserves the same
    const probe = await a.json<CommandJson>(['generate-epic', '--project', 'q', '--epic', 'E10']);
    await waitUntil(async () => (await threadStatus(a, probe.thread_id)) === 'complete', 'the calibration call', 30_000);
    const cost = (await a.json<{ usage: { cost_usd: number } }>(['thread', probe.thread_id])).usage.cost_usd;
    expect(cost).toBeGreaterThan(0);
    expect(cost).toBeLessThan(reserved);
    await a.stopDaemon();
    g.sim.reset();

    // Room for exactly 10 calls: after 9 settled calls the 10th's reservation fits, after 10 no 11th does.
    const budget = 9 * cost + reserved;
    g.writeConfig({ ...base, engine: { max_in_flight: 4, recovery_interval: '200ms' }, budgets: { projects: { p: { total_cost_usd: budget } } } });
    await g.startAll();
    const all = await b.json<CommandJson>(['generate-all', '--project', 'p']);
    // Every child either applied or parked over budget until it is raised, nothing in flight anywhere (an
    // item unparked by a settlement is due again, waiting for the next claim to look: not counted).
    const settled = async () => {
      const rows = await a.query<{ status: string; n: number }>(
        `SELECT CASE WHEN w.status = 'queued' AND w.error_code = 'BUDGET_EXCEEDED' AND w.not_before = @until THEN 'parked' ELSE w.status END AS status,
           count(*) AS n
         FROM llm_work_items w JOIN llm_threads t ON t.id = w.thread_id
         WHERE t.parent_thread_id = @parent GROUP BY 1`,
        { parent: all.thread_id, until: PARKED_UNTIL_RAISED },
      );
      const count = (status: string) => rows.find((r) => r.status === status)?.n ?? 0;
      const applied = count('applied');
      const parked = count('parked');
      return applied + parked === 30 ? { applied, parked } : null;
    };
    const final = await waitUntil(settled, 'every child to be applied or parked', 60_000);
    expect(final).toEqual({ applied: 10, parked: 20 });
    expect(g.sim.calls).toHaveLength(10);
    const usage = await a.json<{ budgets: { project_id: string; spent_total: { cost_usd: number } }[] }>(['usage', '--project', 'p']);
    expect(usage.budgets[0]!.spent_total.cost_usd).toBe(10 * cost);
    expect((await a.queryOne<{ n: number }>('SELECT count(*) AS n FROM llm_work_items WHERE lease_owner IS NOT NULL'))!.n).toBe(0);
    // The 20 parked items are queued, each counted once however many daemons parked and unparked them.
    expect(await a.queueDepth()).toEqual({ kept: 20, queued: 20 });
  });

  it('a project without a budget is not held up by the budget lock: its calls complete while another session holds it', async () => {
    // A project with a budget serializes its spend decisions across daemons on a per-project lock; one
    // without never parks for spend, so its answers must not queue behind that lock (on a shared database
    // it was every project's bottleneck).
    g = await DaemonGroup.start(1);
    const a = g.first;
    g.writeConfig({ ...FAST_RETRY, budgets: { projects: { q: { total_tokens: 1_000_000 } } } });
    await a.startDaemon();
    await a.importProject(evenProject('p'));
    const holder = new pg.Client({ connectionString: a.database!.url });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query("SELECT pg_advisory_xact_lock(hashtextextended('budget:p', 0))");
      const cmd = await a.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E10']);
      await waitUntil(async () => (await threadStatus(a, cmd.thread_id)) === 'complete', 'the request to complete while the lock is held', 30_000);
      const ledger = await a.json<{ entry_type: string }[]>(['ledger', cmd.thread_id]);
      expect(ledger.map((e) => e.entry_type)).toEqual(['prompt', 'response', 'parse_report', 'mutation_report']);
    } finally {
      await holder.query('ROLLBACK');
      await holder.end();
    }
  });

  it('a cancel sent to one daemon aborts the call another daemon has in flight for it', async () => {
    // The call is held until the test releases it: without the abort it would wait for its answer.
    g = await DaemonGroup.start(2, { faults: [{ kind: 'hold', match: 'Epic id: E10' }] });
    g.writeConfig(FAST_RETRY);
    await g.startAll();
    const [a, b] = g.members as [Harness, Harness];
    await a.importProject(evenProject('p'));
    const run = await a.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E10']);
    await waitUntil(() => g.sim.calls.length === 1, 'the call to start');
    // Either daemon may have claimed it: the cancel goes to the other one.
    const lease = await a.queryOne<{ lease_owner: string }>('SELECT lease_owner FROM llm_work_items WHERE thread_id = ?', [run.thread_id]);
    const other = lease!.lease_owner.startsWith(daemonOwner(a.home).homePrefix) ? b : a;
    expect((await other.cli(['cancel', run.thread_id, '--json'])).code).toBe(0);
    const ended = async () => (await a.queryOne<{ status: string }>('SELECT status FROM llm_work_items WHERE thread_id = ?', [run.thread_id]))!.status;
    await waitUntil(async () => (await ended()) === 'failed', 'the call in flight on the leasing daemon to be aborted', 15_000);
    expect(g.sim.calls).toHaveLength(1);
    expect(g.sim.calls[0]!.status).toBeNull(); // never answered: nothing paid for an answer nobody applies
    expect(g.sim.release()).toBe(0); // the held request is gone: its connection was closed by the abort
    const ledger = await a.json<{ entry_type: string; payload: { code?: string } }[]>(['ledger', run.thread_id]);
    expect(ledger.map((e) => e.entry_type)).toEqual(['prompt', 'error']);
    expect(ledger[1]!.payload.code).toBe('CANCELED');
    expect(await threadStatus(a, run.thread_id)).toBe('canceled');
    expect((await a.queryOne<{ n: number }>('SELECT count(*) AS n FROM locks'))!.n).toBe(0);
  });

  it('a cancel sent to one daemon while both claim the run’s children ends every child, each recorded once', async () => {
    g = await DaemonGroup.start(2, { latencyMs: 200 });
    g.writeConfig({ ...FAST_RETRY, engine: { max_in_flight: 16 } });
    await g.startAll();
    const [a, b] = g.members as [Harness, Harness];
    await a.importProject(project('p', 300));
    const run = await a.json<CommandJson>(['generate-all', '--project', 'p']);
    await waitUntil(() => g.sim.calls.length >= 20, 'both daemons to be claiming');
    // Claims commit on both daemons while the cancel runs: the cancel ends what is still queued then, and
    // leaves what a claim took to its pipeline (aborted here, or recorded as canceled when its answer lands).
    const cancel = await b.cli(['cancel', run.thread_id, '--json']);
    expect(cancel.code, cancel.stderr).toBe(0);
    const children = await a.query<{ status: string }>('SELECT status FROM llm_threads WHERE parent_thread_id = ?', [run.thread_id]);
    expect(children.filter((c) => c.status === 'open' || c.status === 'running')).toEqual([]);
    // The calls in flight end as their answers land (or their aborts do).
    const leased = async () =>
      (await a.queryOne<{ n: number }>("SELECT count(*) AS n FROM llm_work_items WHERE status IN ('queued', 'claimed', 'running')"))!.n;
    await waitUntil(async () => (await leased()) === 0, 'every call in flight to end', 30_000);
    // Each item that ended canceled has exactly one CANCELED entry; nothing was applied after the cancel.
    const doubled = await a.query(
      `SELECT work_item_id FROM llm_ledger_entries WHERE entry_type = 'error' AND payload LIKE '%"code":"CANCELED"%'
       GROUP BY work_item_id HAVING count(*) > 1`,
    );
    expect(doubled).toEqual([]);
    expect((await a.queryOne<{ status: string }>('SELECT status FROM llm_threads WHERE id = ?', [run.thread_id]))!.status).toBe('canceled');
    expect(await a.json(['ledger', 'verify'])).toMatchObject({ ok: true, first_break: null });
    // The cancel's ends of queued items and the claims beside it all reached the queue depth.
    expect(await a.queueDepth()).toEqual({ kept: 0, queued: 0 });
  });
});
