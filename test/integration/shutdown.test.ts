/**
 * Graceful shutdown: SIGTERM while 20 calls are in flight stops claiming, drains for up to 10 s, leaves
 * the rest to recovery and exits 0; the next start completes every one of them.
 */
import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, Harness, project, waitUntil, type CommandJson, type ThreadJson } from '../helpers/harness.js';

let h: Harness;
beforeAll(async () => {
  // Each answer takes 15 s: longer than the 10 s drain, so the drain must give up and exit.
  h = await Harness.start({ latencyMs: 15_000 });
  h.writeConfig({ engine: { max_in_flight: 32, drain_timeout: '10s' }, retry: { base: '50ms', cap: '200ms' } });
});
afterAll(() => h.cleanup());

describe('SIGTERM with 20 calls in flight', () => {
  it('exits 0 within 11 s, and a restart completes all 20', { timeout: 90_000 }, async () => {
    const daemon = spawn(process.execPath, [CLI, 'daemon', 'run'], { env: h.env, stdio: 'ignore' });
    const exit = new Promise<number | null>((resolve) => daemon.on('exit', (code) => resolve(code)));
    await waitUntil(async () => (await h.cli(['daemon', 'status'])).code === 0, 'the daemon to answer');
    await h.importProject(project('p', 20));
    const parent = await h.json<CommandJson>(['generate-all', '--project', 'p']);
    await waitUntil(() => h.sim.calls.filter((c) => c.status === null).length === 20, '20 calls in flight at the provider');

    daemon.kill('SIGTERM');
    const code = await Promise.race([exit, new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), 11_000))]);
    expect(code).toBe(0);

    h.sim.setLatency(0);
    const end = await h.waitForEnd(parent.thread_id); // autostarts the daemon; recovery resumes the calls
    expect(end.status).toBe('complete');
    expect(end.child_summary).toEqual({ complete: 20 });
    const children = (await h.json<ThreadJson[]>(['threads', '--project', 'p'])).filter((t) => t.parent_thread_id === parent.thread_id);
    expect(children).toHaveLength(20);
    // Each interrupted call is on record as such, then retried: none lost, none silently repeated.
    for (const c of children) {
      const types = (await h.json<{ entry_type: string; payload: { code?: string } }[]>(['ledger', c.thread_id])).map((e) =>
        e.entry_type === 'error' ? `error:${e.payload.code}` : e.entry_type,
      );
      expect(types).toEqual(['prompt', 'error:INTERRUPTED', 'prompt', 'response', 'parse_report', 'mutation_report']);
    }
    expect((await h.json(['ledger', 'verify'])).ok).toBe(true);
    expect(h.logText()).toContain('calls still in flight at exit');
  });
});
