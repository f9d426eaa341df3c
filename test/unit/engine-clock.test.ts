/**
 * The engine with an injected clock: the retry schedule it writes is exact (random pinned), and
 * nothing runs before the clock reaches an item's not_before. Real SQLite file, real simulator over
 * HTTP; waits are on engine events, never on sleeps.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { App } from '../../src/daemon/app.js';
import { loadConfig } from '../../src/daemon/config/config.js';
import type { EngineEvent } from '../../src/daemon/engine/events.js';
import { createLogger } from '../../src/daemon/runtime/logger.js';
import { createSimulator, type Simulator } from '../../src/sim/simulator.js';
import { project } from '../helpers/harness.js';

class FakeClock {
  t = Date.parse('2026-01-01T00:00:00Z');
  now = () => this.t;
}

function nextEvent(app: App, match: (e: EngineEvent) => boolean): Promise<EngineEvent> {
  return new Promise((resolve) => {
    const off = app.bus.subscribe((e) => {
      if (match(e)) {
        off();
        resolve(e);
      }
    });
  });
}

describe('engine schedule under a fake clock', () => {
  let dir: string;
  let sim: Simulator;
  let app: App;
  let clock: FakeClock;

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'cmb-clock-'));
    sim = await createSimulator();
    clock = new FakeClock();
    const config = loadConfig(dir, { OPENAI_BASE_URL: sim.url, OPENAI_API_KEY: 'k' });
    app = new App({
      config: { ...config, retry: { ...config.retry, baseMs: 1000, capMs: 60_000, jitter: 0.1 } },
      logger: createLogger(null, 'silent'),
      clock,
      random: () => 0.5,
    });
    await app.start();
    await app.projects.import(project('p', 1));
  });
  afterEach(async () => {
    await app.shutdown(0);
    await sim.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('backs off 1 s then 2 s after 500s, each due exactly at now + delay', async () => {
    sim.setFaults([{ kind: 'server_error', times: 2 }]);
    const t0 = clock.t;
    const firstRetry = nextEvent(app, (e) => e.type === 'work_item' && e.status === 'queued' && e.attempt === 2);
    const { thread_id } = await app.threads.generateEpic('p', 'E1', { force: false, deadlineMs: null, createdBy: null });
    expect(await firstRetry).toMatchObject({ not_before: t0 + 1000 });

    const secondRetry = nextEvent(app, (e) => e.type === 'work_item' && e.status === 'queued' && e.attempt === 3);
    clock.t = t0 + 1000;
    app.engine.wake();
    expect(await secondRetry).toMatchObject({ not_before: t0 + 1000 + 2000 });

    const done = nextEvent(app, (e) => e.type === 'thread' && e.thread_id === thread_id && e.status === 'complete');
    clock.t = t0 + 3000;
    app.engine.wake();
    await done;
    const delays = (await app.ledger.thread(thread_id)).filter((e) => e.entry_type === 'error').map((e) => e.payload.delay_ms);
    expect(delays).toEqual([1000, 2000]);
    expect(sim.calls).toHaveLength(3);
  });

  it('honours Retry-After over a shorter backoff, and does not call before the clock gets there', async () => {
    sim.setFaults([{ kind: 'rate_limit', retry_after_s: 7, times: 1 }]);
    const t0 = clock.t;
    const retry = nextEvent(app, (e) => e.type === 'work_item' && e.status === 'queued' && e.attempt === 2);
    const { thread_id } = await app.threads.generateEpic('p', 'E1', { force: false, deadlineMs: null, createdBy: null });
    expect(await retry).toMatchObject({ not_before: t0 + 7000 });

    clock.t = t0 + 6999;
    expect(await app.engine.claimDue()).toBe(0);
    expect(sim.calls).toHaveLength(1);

    const done = nextEvent(app, (e) => e.type === 'thread' && e.thread_id === thread_id && e.status === 'complete');
    clock.t = t0 + 7000;
    app.engine.wake();
    await done;
    expect(sim.calls).toHaveLength(2);
  });
});
