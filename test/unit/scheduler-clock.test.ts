/**
 * The scheduler under a fake clock, with a real SQLite file and the simulator over HTTP: periods run
 * once, periods missed while no daemon ran collapse into one run (or none with `skip`), paused
 * schedules run nothing, a pending run is not ready to read, and scheduled generate-all runs at the
 * scheduled priority. Waits are on engine events, never on sleeps.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { App } from '../../src/daemon/app.js';
import { loadConfig } from '../../src/daemon/config/config.js';
import type { EngineEvent } from '../../src/daemon/engine/events.js';
import { createLogger } from '../../src/daemon/runtime/logger.js';
import { PRIORITY_SCHEDULED } from '../../src/domain/operations.js';
import { createSimulator, type Simulator } from '../../src/sim/simulator.js';
import { project } from '../helpers/harness.js';

const HOUR = 3_600_000;
const T0 = Date.parse('2026-03-01T00:30:00Z');

class FakeClock {
  t = T0;
  now = () => this.t;
}

function threadEnded(app: App, kind: string): Promise<EngineEvent> {
  return new Promise((resolve) => {
    const off = app.bus.subscribe((e) => {
      if (e.type === 'thread' && e.kind === kind && e.parent_thread_id === null && (e.status === 'complete' || e.status === 'failed')) {
        off();
        resolve(e);
      }
    });
  });
}

describe('scheduler under a fake clock', () => {
  let dir: string;
  let sim: Simulator;
  let clock: FakeClock;
  const apps: App[] = [];

  async function startApp(): Promise<App> {
    const config = loadConfig(dir, { OPENAI_BASE_URL: sim.url, OPENAI_API_KEY: 'k' });
    const app = new App({ config, logger: createLogger(null, 'silent'), schedulerClock: clock });
    apps.push(app);
    await app.start();
    return app;
  }

  async function stopApp(app: App): Promise<void> {
    apps.splice(apps.indexOf(app), 1);
    await app.shutdown(5000);
  }

  const briefingCalls = () => sim.calls.filter((c) => c.operation === 'project_briefing');

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'cmb-sched-'));
    sim = await createSimulator();
    clock = new FakeClock();
  });
  afterEach(async () => {
    for (const app of apps.splice(0)) await app.shutdown(0);
    await sim.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('runs a due period once; a second tick for it claims nothing and calls nothing', async () => {
    const app = await startApp();
    await app.projects.import(project('p', 2));
    const s = await app.schedules.add({ project_id: 'p', operation: 'briefing', cron: '0 * * * *', timezone: 'UTC', catch_up: 'latest' });
    expect(s.next_run_at).toBe('2026-03-01T01:00:00.000Z');
    expect((await app.scheduler.tick()).claimed).toHaveLength(0); // 00:30: nothing due yet

    clock.t = T0 + 30 * 60_000 + 1000; // 01:00:01
    const done = threadEnded(app, 'project_briefing');
    const first = await app.scheduler.tick();
    expect(first.claimed.map((r) => r.period_key)).toEqual(['2026-03-01T01:00:00.000Z']);
    await done;
    const again = await app.scheduler.tick();
    expect(again).toMatchObject({ claimed: [], lost: 1, reclaimed: [] });
    expect(briefingCalls()).toHaveLength(1);
    const [run] = await app.schedules.runs(s.schedule_id, 10);
    expect(run).toMatchObject({ status: 'complete', ready: true, claims: 1, thread_status: 'complete' });
    expect(run!.usage!.responses).toBe(1);
    expect(await app.projects.briefing('p', '2026-03-01')).toMatchObject({ date: '2026-03-01', version: 1 });
  });

  it('a daemon down over three periods catches up with one run, for the latest period', async () => {
    let app = await startApp();
    await app.projects.import(project('p', 1));
    const s = await app.schedules.add({ project_id: 'p', operation: 'briefing', cron: '0 * * * *', timezone: 'UTC', catch_up: 'latest' });
    clock.t = T0 + 30 * 60_000; // 01:00 exactly
    let done = threadEnded(app, 'project_briefing');
    await app.scheduler.tick();
    await done;
    await stopApp(app);

    clock.t = T0 + 4 * HOUR; // 04:30: 02:00, 03:00 and 04:00 passed with no daemon
    const config = loadConfig(dir, { OPENAI_BASE_URL: sim.url, OPENAI_API_KEY: 'k' });
    app = new App({ config, logger: createLogger(null, 'silent'), schedulerClock: clock });
    apps.push(app);
    done = threadEnded(app, 'project_briefing');
    await app.start(); // the start-up tick catches up
    await done;
    const runs = await app.schedules.runs(s.schedule_id, 10);
    expect(runs.map((r) => [r.period_key, r.status])).toEqual([
      ['2026-03-01T04:00:00.000Z', 'complete'],
      ['2026-03-01T01:00:00.000Z', 'complete'],
    ]);
    expect(briefingCalls()).toHaveLength(2);
  });

  it('with catch-up "skip", missed periods do not run; the next on-time period does', async () => {
    let app = await startApp();
    await app.projects.import(project('p', 1));
    const s = await app.schedules.add({ project_id: 'p', operation: 'briefing', cron: '0 * * * *', timezone: 'UTC', catch_up: 'skip' });
    await stopApp(app);
    clock.t = T0 + 3 * HOUR; // 03:30: 01:00, 02:00 and 03:00 missed
    app = await startApp();
    expect(await app.schedules.runs(s.schedule_id, 10)).toEqual([]);

    clock.t = T0 + 3.5 * HOUR + 2000; // 04:00:02, within the misfire grace
    const done = threadEnded(app, 'project_briefing');
    const tick = await app.scheduler.tick();
    expect(tick.claimed.map((r) => r.period_key)).toEqual(['2026-03-01T04:00:00.000Z']);
    await done;
    expect(briefingCalls()).toHaveLength(1);
  });

  it('a paused schedule runs nothing, and resuming does not catch up what passed while paused', async () => {
    const app = await startApp();
    await app.projects.import(project('p', 1));
    const s = await app.schedules.add({ project_id: 'p', operation: 'briefing', cron: '0 * * * *', timezone: 'UTC', catch_up: 'latest' });
    expect((await app.schedules.pause(s.schedule_id)).next_run_at).toBeNull();
    clock.t = T0 + 2 * HOUR; // 02:30
    expect((await app.scheduler.tick()).claimed).toEqual([]);
    const resumed = await app.schedules.resume(s.schedule_id);
    expect(resumed).toMatchObject({ status: 'active', next_run_at: '2026-03-01T03:00:00.000Z' });
    expect((await app.scheduler.tick()).claimed).toEqual([]); // 02:00 passed while paused
    await app.schedules.remove(s.schedule_id);
    clock.t = T0 + 3 * HOUR;
    expect((await app.scheduler.tick()).claimed).toEqual([]);
    expect(await app.schedules.list(false)).toEqual([]);
    expect((await app.schedules.list(true)).map((x) => x.status)).toEqual(['removed']);
    expect(briefingCalls()).toHaveLength(0);
  });

  it('a pending run is not ready: no usage shown, and its briefing is reported as not ready', async () => {
    const app = await startApp();
    await app.projects.import(project('p', 1));
    sim.setFaults([{ kind: 'hang', hang_ms: 400, times: 1 }]);
    const s = await app.schedules.add({ project_id: 'p', operation: 'briefing', cron: '0 9 * * *', timezone: 'Europe/Berlin', catch_up: 'latest' });
    clock.t = Date.parse('2026-03-01T08:00:05Z'); // 09:00:05 in Berlin
    const done = threadEnded(app, 'project_briefing');
    await app.scheduler.tick();
    const [pending] = await app.schedules.runs(s.schedule_id, 10);
    expect(pending).toMatchObject({ status: 'pending', ready: false, usage: null });
    await expect(app.projects.briefing('p', '2026-03-01')).rejects.toThrow(/not ready yet/);
    await done;
    expect((await app.schedules.runs(s.schedule_id, 10))[0]).toMatchObject({ status: 'complete', ready: true });
    expect(await app.projects.briefing('p', null)).toMatchObject({ date: '2026-03-01' });
  });

  it('a scheduled generate-all runs its children at the scheduled priority and records their usage', async () => {
    const app = await startApp();
    await app.projects.import(project('p', 3));
    const s = await app.schedules.add({ project_id: 'p', operation: 'generate-all', cron: '0 * * * *', timezone: 'UTC', catch_up: 'latest' });
    clock.t = T0 + 30 * 60_000 + 1000;
    const done = threadEnded(app, 'story_generate_all');
    await app.scheduler.tick();
    await done;
    const [run] = await app.schedules.runs(s.schedule_id, 10);
    expect(run).toMatchObject({ status: 'complete', thread_status: 'complete' });
    expect(run!.usage!.responses).toBe(3);
    const priorities = app.db.prepare('SELECT DISTINCT priority FROM llm_work_items').all();
    expect(priorities).toEqual([{ priority: PRIORITY_SCHEDULED }]);
    expect((await app.projects.backlog('p'))!.epics.every((e) => e.stories.length > 0)).toBe(true);
  });
});
