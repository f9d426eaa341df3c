/**
 * Supersede (issue 16, item 5; ADR-002 §10 "supersede logic correctly discards obsolete jobs under
 * rapid fire"): a `--force` request for a target whose previous request is still queued — never
 * leased, nothing paid — replaces it. The real daemon over HTTP (50 requests at once) and the CLI.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { FAST_RETRY, Harness, project, waitUntil, type CommandJson } from '../helpers/harness.js';
import { startHttpDaemon } from '../helpers/http.js';
import { parseExposition } from '../helpers/prometheus.js';

let h: Harness;
afterEach(async () => {
  await h?.cleanup();
});

/** One call at a time; E2's call is held until the test releases it, so whatever is asked for E1 meanwhile stays queued. */
async function setup() {
  h = await Harness.start();
  h.writeConfig({ ...FAST_RETRY, engine: { max_in_flight: 1 } });
  await h.importProject(project('p', 2));
  h.setFaults([{ kind: 'hold', match: 'Epic id: E2', times: 1 }]);
}

const e1Calls = () => h.sim.calls.filter((c) => c.epic_id === 'E1').length;

async function supersededCount(): Promise<number> {
  const text = (await h.cli(['metrics'])).stdout;
  const family = parseExposition(text).find((f) => f.name === 'combine_failures_total');
  return Number(family?.metrics.find((m) => m.labels?.code === 'SUPERSEDED')?.value ?? 0);
}

function e1Items(): Promise<{ thread_id: string; status: string; error_code: string | null; attempt: number }[]> {
  return h.query(
    `SELECT w.thread_id, w.status, w.error_code, w.attempt FROM llm_work_items w JOIN llm_threads t ON t.id = w.thread_id
     WHERE t.target_ref LIKE '%"epic_id":"E1"%' ORDER BY w.created_at, w.id`,
  );
}

describe('supersede', () => {
  it('rapid fire: 50 forced requests for one epic while its call cannot start make one call; 49 end canceled with SUPERSEDED', async () => {
    await setup();
    const api = await startHttpDaemon(h);
    const blocker = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E2']);
    await waitUntil(() => h.sim.calls.length === 1, 'E2’s call to be in flight (the only slot)');

    const answers = await Promise.all(
      Array.from({ length: 50 }, () => api.request('POST', '/commands/story-backlog/generate-epic', { body: { project_id: 'p', epic_id: 'E1', force: true } })),
    );
    expect(answers.map((a) => a.status)).toEqual(Array(50).fill(202));
    const ids = answers.map((a) => a.json.thread_id as string);
    expect(new Set(ids).size).toBe(50); // each forced request replaced the one before it
    expect(answers.filter((a) => a.json.superseded_thread_id !== undefined)).toHaveLength(49);
    expect(h.sim.release()).toBe(1); // E2's call: E1's survivor can start now

    // Exactly one E1 thread survives; it runs once E2's call is done.
    const survivors = await waitUntil(async () => {
      const threads = await Promise.all(ids.map((id) => h.json<any>(['thread', id])));
      return threads.every((t) => t.status === 'complete' || t.status === 'canceled') ? threads : null;
    }, 'every E1 thread to end');
    expect(survivors.filter((t) => t.status === 'complete')).toHaveLength(1);
    expect(survivors.filter((t) => t.status === 'canceled')).toHaveLength(49);
    expect((await h.waitForEnd(blocker.thread_id)).status).toBe('complete');

    expect(e1Calls()).toBe(1);
    const items = await e1Items();
    expect(items.filter((w) => w.status === 'applied')).toHaveLength(1);
    // The work item state machine has no `canceled` status: a canceled item ends `failed`, as `combine cancel`'s do.
    expect(items.filter((w) => w.status === 'failed' && w.error_code === 'SUPERSEDED')).toHaveLength(49);
    expect(items.every((w) => w.attempt === 1)).toBe(true);
    expect(await supersededCount()).toBe(49);
    expect((await h.json<any>(['ledger', 'verify'])).ok).toBe(true);
  });

  it('the CLI says which thread a forced request replaced; the replaced one shows SUPERSEDED; a request already in flight is not replaced', async () => {
    await setup();
    // E1's call, once it starts, is held too: a forced request meets it in flight.
    h.setFaults([
      { kind: 'hold', match: 'Epic id: E2', times: 1 },
      { kind: 'hold', match: 'Epic id: E1', times: 1 },
    ]);
    await h.startDaemon();
    await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E2']);
    await waitUntil(() => h.sim.calls.length === 1, 'E2’s call to be in flight');
    const first = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E1']);
    const second = await h.json<any>(['generate-epic', '--project', 'p', '--epic', 'E1', '--force']);
    expect(second).toMatchObject({ deduplicated: false, superseded_thread_id: first.thread_id });
    const human = await h.cli(['generate-epic', '--project', 'p', '--epic', 'E1', '--force']);
    expect(human.code).toBe(0);
    expect(human.stdout).toContain(`superseded ${second.thread_id}`);

    const old = await h.json<any>(['thread', first.thread_id]);
    expect(old.status).toBe('canceled');
    const ledger = await h.json<any[]>(['ledger', first.thread_id]);
    expect(ledger.at(-1)).toMatchObject({ entry_type: 'error', payload: { code: 'SUPERSEDED', superseded_by: second.thread_id } });

    // Once E1's call is under way, a forced request for it is answered with that thread: nothing is paid twice.
    expect(h.sim.release()).toBe(1); // E2's call ends; E1's starts (and is held)
    await waitUntil(() => e1Calls() === 1, 'E1’s call to start');
    const running = (await h.json<any[]>(['threads', '--active'])).find((t) => t.target_ref.epic_id === 'E1');
    expect(running).toMatchObject({ status: 'running' });
    const again = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E1', '--force']);
    expect(again).toMatchObject({ thread_id: running.thread_id, deduplicated: true });
    await waitUntil(() => h.sim.release() === 1, 'E1’s held call to be released');
    await waitUntil(async () => (await h.json<any[]>(['threads', '--active'])).length === 0, 'all work to end');
    expect(e1Calls()).toBe(1);
    expect(await supersededCount()).toBe(2);
  });
});
