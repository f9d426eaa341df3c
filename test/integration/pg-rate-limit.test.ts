/**
 * The rate limiter shared by daemons on one Postgres (issue 18): the requests/min bucket and the 429
 * park are rows every daemon's claim goes through, so three daemons together make no more calls than
 * one route's limit allows, and a 429 one daemon gets holds back the other daemons' calls until its reset.
 * A claim whose start makes no call gives its share of the buckets back, for every daemon's next call.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { type CommandJson, Harness, project, waitUntil } from '../helpers/harness.js';
import { MoreDaemons } from '../helpers/more-daemons.js';

let h: Harness;
let more: MoreDaemons | null = null;
afterEach(async () => {
  await more?.cleanup();
  await h?.cleanup();
});

/** Starts three daemons with `config` on the harness's database: the harness's home and two more. */
async function threeDaemons(config: unknown): Promise<void> {
  more = new MoreDaemons(h);
  h.writeConfig(config);
  await h.startDaemon();
  await Promise.all([more.start(config), more.start(config)]);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('three daemons on one Postgres share one rate limit', () => {
  it('a limit of 3 requests/min: 3 calls in all, not 3 per daemon', async () => {
    h = await Harness.start();
    // 3/min refills one request every 20 s: far more than this test waits.
    await threeDaemons({ engine: { max_in_flight: 4, recovery_interval: '1h' }, rate_limits: { 'test-model': { requests_per_minute: 3 } } });
    await h.importProject(project('shop', 9));
    const all = await h.json<CommandJson>(['generate-all', '--project', 'shop']);
    await waitUntil(() => h.sim.calls.filter((c) => c.status === 200).length >= 3, 'three answered calls');
    // Every daemon was woken by the command and by each answer; unshared buckets would each allow 3 more.
    await sleep(1500);
    expect(h.sim.calls).toHaveLength(3);
    const children = await h.query<{ status: string }>('SELECT status FROM llm_threads WHERE parent_thread_id = ?', [all.thread_id]);
    expect(children.filter((c) => c.status === 'complete')).toHaveLength(3);
    expect(children.filter((c) => c.status !== 'complete')).toHaveLength(6);
  });

  it('a 429 one daemon gets holds back every daemon until the reset', async () => {
    h = await Harness.start({ latencyMs: 300, faults: [{ kind: 'rate_limit', times: 1, retry_after_s: 3 }] });
    await threeDaemons({ engine: { max_in_flight: 1, recovery_interval: '1h' } });
    await h.importProject(project('shop', 6));
    const all = await h.json<CommandJson>(['generate-all', '--project', 'shop']);
    const end = await h.waitForEnd(all.thread_id);
    expect(end.status).toBe('complete');

    const limited = h.sim.calls.find((c) => c.fault === 'rate_limit')!;
    const rows = await h.query<{ parked_until: number }>("SELECT parked_until FROM llm_rate_limits WHERE model = 'test-model'");
    const parkedUntil = rows[0]!.parked_until;
    expect(parkedUntil).toBeGreaterThanOrEqual(limited.at + 2900); // Retry-After 3 s, from when the 429 arrived
    // Each of the two other daemons (one call slot each) may have claimed one call before the park
    // committed; none claims again until it ends. Unshared, each would have gone on calling every 300 ms.
    const duringPark = h.sim.calls.filter((c) => c.at > limited.at && c.at < parkedUntil);
    expect(duringPark.length).toBeLessThanOrEqual(2);
    expect(h.sim.calls.filter((c) => c.at >= parkedUntil).length).toBeGreaterThan(0);
    expect(h.sim.calls.filter((c) => c.status === 200)).toHaveLength(6);
    // The items the park put back in the queue and their claims after it reached the queue depth.
    expect(await h.queueDepth()).toEqual({ kept: 0, queued: 0 });
  });
});

describe("the shared bucket's share of a claim whose start makes no call", () => {
  it('a claim whose start makes no call (its answer cached) gives its request back: the next call goes at once', async () => {
    h = await Harness.start();
    // 2/min refills one request every 30 s: far more than this test takes. The cache answers a request seen before.
    h.writeConfig({ cache: true, provider: { temperature: 0 }, rate_limits: { 'test-model': { requests_per_minute: 2 } } });
    await h.importProject(project('shop', 2));
    const run = async (args: string[]) => (await h.waitForEnd((await h.json<CommandJson>(args)).thread_id)).status;
    expect(await run(['generate-epic', '--project', 'shop', '--epic', 'E1'])).toBe('complete');
    // The same request again: its claim takes the bucket's second request, and its start answers it from the cache.
    expect(await run(['generate-epic', '--project', 'shop', '--epic', 'E1', '--force'])).toBe('complete');
    expect(h.sim.calls).toHaveLength(1);
    // Given back before the item ended: a request is there now, not the few seconds' refill (a tenth of one).
    const rows = await h.query<{ requests_level: number }>("SELECT requests_level FROM llm_rate_limits WHERE model = 'test-model'");
    expect(rows[0]!.requests_level).toBeGreaterThanOrEqual(1);
    // So another item's call is admitted now, not when the bucket has refilled.
    expect(await run(['generate-epic', '--project', 'shop', '--epic', 'E2'])).toBe('complete');
    expect(h.sim.calls.filter((c) => c.status === 200)).toHaveLength(2);
  });
});
