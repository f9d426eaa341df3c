/**
 * The canary (issue 16, item 6): every `canary.interval` a synthetic work item goes through claim →
 * record → answer → apply on a built-in zero-cost provider; health reports its last success and
 * latency, and a canary unfinished after `canary.timeout` turns health unready. Real daemon, on each backend.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { FAST_RETRY, Harness, waitUntil } from '../helpers/harness.js';
import { parseExposition } from '../helpers/prometheus.js';

let h: Harness;
afterEach(async () => {
  await h?.cleanup();
});

async function health(): Promise<any> {
  return JSON.parse((await h.cli(['health', '--json'])).stdout);
}

/** Canary threads, oldest first (ids are time-ordered: they break a same-millisecond tie). */
function canaryThreads(): Promise<{ id: string; status: string }[]> {
  return h.query(`SELECT id, status FROM llm_threads WHERE kind = 'combine_canary' ORDER BY created_at, id`);
}

describe('canary', () => {
  it('runs through the whole pipeline on the zero-cost provider: health shows its last success and latency; nothing is paid or listed', async () => {
    h = await Harness.start();
    h.writeConfig({ ...FAST_RETRY, canary: { interval: '200ms', timeout: '10s' } });
    await h.startDaemon();
    const hj = await waitUntil(async () => {
      const x = await health();
      return x.canary.last_success_at ? x : null;
    }, 'a canary to succeed');
    expect(hj.canary).toMatchObject({ enabled: true, interval_ms: 200, timeout_ms: 10_000, ok: true, last_failure: null });
    expect(hj.canary.last_latency_ms).toBeGreaterThanOrEqual(0);
    expect(hj.checks.canary).toBe(true);
    expect(hj.ready).toBe(true);

    // It went through claim, record, answer and apply: a prompt/response pair, a parse report and a mutation in the ledger.
    const done = (await canaryThreads()).find((t) => t.status === 'complete')!;
    const ledger = await h.json<any[]>(['ledger', done.id]);
    expect(ledger.map((e) => e.entry_type)).toEqual(['prompt', 'response', 'parse_report', 'mutation_report']);
    expect(ledger[0].payload).toMatchObject({ model: 'combine-canary', endpoint: 'builtin:canary' });
    expect(ledger[1].cost_usd ?? 0).toBe(0);

    // Nothing paid, nothing in the user's views.
    expect(h.sim.calls).toHaveLength(0);
    expect(await h.json<any[]>(['threads'])).toEqual([]);
    expect(JSON.stringify(await h.json<any>(['usage']))).not.toContain('combine:system');
    expect(await h.json<any[]>(['project', 'list'])).toEqual([]);
    const metrics = parseExposition((await h.cli(['metrics'])).stdout);
    expect(Number(metrics.find((f) => f.name === 'combine_canary_last_success_timestamp_seconds')!.metrics[0]!.value)).toBeGreaterThan(0);
    expect((await h.json<any>(['ledger', 'verify'])).ok).toBe(true);
  });

  it('a canary that cannot finish within canary.timeout turns health unready; it is ready again once one completes', async () => {
    h = await Harness.start();
    h.writeConfig({ ...FAST_RETRY, engine: { recovery_interval: '10m' }, canary: { interval: '200ms', timeout: '1s' } });
    await h.startDaemon();
    await waitUntil(async () => (await health()).canary.last_success_at, 'a first canary');
    // Something holds the canary's lock: the next canaries stay queued (each replacing the one before).
    // Taken when free: a canary running at that moment holds it for a few ms.
    await waitUntil(
      async () =>
        (
          await h.edit((sql) =>
            sql.run(
              `INSERT INTO locks (scope, owner, acquired_at, expires_at) VALUES ('system:canary', 'stuck-holder', ?, NULL) ON CONFLICT (scope) DO NOTHING`,
              [Date.now()],
            ),
          )
        ).changes === 1,
      'the canary lock to be free for the stuck holder',
    );
    const late = await waitUntil(async () => {
      const x = await health();
      return x.canary.pending?.late ? x : null;
    }, 'the canary to be late');
    expect(late.canary.ok).toBe(false);
    expect(late.checks.canary).toBe(false);
    expect(late.ready).toBe(false);
    expect(
      Object.entries(late.checks)
        .filter(([, ok]) => !ok)
        .map(([name]) => name),
    ).toEqual(['canary']);
    const unready = await h.cli(['health']);
    expect(unready.code).not.toBe(0);
    // Canaries that never started were superseded, not piled up.
    expect((await canaryThreads()).filter((t) => t.status === 'open' || t.status === 'running').length).toBe(1);

    await h.edit((sql) => sql.run(`DELETE FROM locks WHERE scope = 'system:canary'`));
    const again = await waitUntil(async () => {
      const x = await health();
      return x.canary.ok && x.ready ? x : null;
    }, 'health ready again');
    expect(again.canary.pending === null || again.canary.pending.late === false).toBe(true);
    expect(Date.parse(again.canary.last_success_at)).toBeGreaterThan(Date.parse(late.canary.last_success_at));
  });

  it('canary.interval 0 turns it off', async () => {
    h = await Harness.start();
    h.writeConfig({ ...FAST_RETRY, canary: { interval: 0 } });
    await h.startDaemon();
    await new Promise((r) => setTimeout(r, 300));
    const hj = await health();
    expect(hj.canary).toMatchObject({ enabled: false, ok: true, last_success_at: null });
    expect(await canaryThreads()).toEqual([]);
  });
});
