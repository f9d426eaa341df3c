/**
 * Resource pressure with the real daemon (issue 16, item 3). The signals are injected through the
 * probe's root directory (COMBINE_PRESSURE_ROOT, which the harness points into the test's home): the
 * test writes `proc/stat`, `proc/meminfo` and `sys/class/power_supply/*` instead of loading the machine.
 * The WAL signal (SQLite's own) is in wal.test.ts.
 */
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { FAST_RETRY, Harness, project, waitUntil, type CommandJson } from '../helpers/harness.js';
import { parseExposition } from '../helpers/prometheus.js';

let h: Harness;
let stopCpu: (() => void) | undefined;
afterEach(async () => {
  stopCpu?.();
  stopCpu = undefined;
  await h?.cleanup();
});

const root = () => h.env.COMBINE_PRESSURE_ROOT!;

function writeBattery(percent: number, status: 'Discharging' | 'Charging') {
  const dir = join(root(), 'sys', 'class', 'power_supply', 'BAT0');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'type'), 'Battery\n');
  writeFileSync(join(dir, 'capacity'), `${percent}\n`);
  writeFileSync(join(dir, 'status'), `${status}\n`);
}

/** Keeps advancing `proc/stat` as a machine `busy` (0–1) busy would, every 20 ms, until the returned stop. */
function simulateCpu(initialBusy: number): { setBusy(b: number): void; stop(): void } {
  mkdirSync(join(root(), 'proc'), { recursive: true });
  let busy = initialBusy;
  let user = 0;
  let idle = 0;
  const write = () => {
    user += Math.round(100 * busy);
    idle += 100 - Math.round(100 * busy);
    // Written whole (rename), so the daemon never reads half a file.
    writeFileSync(join(root(), 'proc', 'stat.tmp'), `cpu  ${user} 0 0 ${idle} 0 0 0 0 0 0\n`);
    renameSync(join(root(), 'proc', 'stat.tmp'), join(root(), 'proc', 'stat'));
  };
  write();
  const timer = setInterval(write, 20);
  return { setBusy: (b) => (busy = b), stop: () => clearInterval(timer) };
}

async function health(): Promise<any> {
  return JSON.parse((await h.cli(['health', '--json'])).stdout);
}

async function pressureGauge(signal: string): Promise<number> {
  const family = parseExposition((await h.cli(['metrics'])).stdout).find((f) => f.name === 'combine_pressure');
  return Number(family?.metrics.find((m) => m.labels?.signal === signal)?.value);
}

/** A project's work items, oldest first (ids are time-ordered: they break a same-millisecond tie). */
function items(projectId: string): Promise<{ status: string; attempt: number; priority: number }[]> {
  return h.query(`SELECT status, attempt, priority FROM llm_work_items WHERE project_id = ? ORDER BY created_at, id`, [projectId]);
}

describe('resource pressure', () => {
  it('on battery, discharging under min_percent: only interactive work runs; bulk waits without burning an attempt, and runs once charging', async () => {
    h = await Harness.start();
    h.writeConfig({ ...FAST_RETRY, pressure: { probe_interval: '50ms', battery: { min_percent: 20 } } });
    writeBattery(12, 'Discharging');
    await h.importProject(project('bulk', 3));
    await h.importProject(project('live', 1));
    const hj = await waitUntil(async () => {
      const x = await health();
      return x.pressure.active.includes('battery') ? x : null;
    }, 'battery pressure in health');
    expect(hj.pressure).toMatchObject({
      paused: ['bulk', 'scheduled'],
      battery: { present: true, percent: 12, discharging: true, min_percent: 20, low: true },
      accepting_commands: true,
    });
    expect(hj.ready).toBe(true); // slower, not broken
    expect(await pressureGauge('battery')).toBe(1);

    const all = await h.json<CommandJson>(['generate-all', '--project', 'bulk']);
    const live = await h.json<CommandJson>(['generate-epic', '--project', 'live', '--epic', 'E1']);
    expect((await h.waitForEnd(live.thread_id)).status).toBe('complete');
    await new Promise((r) => setTimeout(r, 500)); // several claim rounds
    expect(h.sim.calls.map((c) => c.epic_id)).toEqual(['E1']); // the interactive one only
    expect((await items('bulk')).every((w) => w.status === 'queued' && w.attempt === 1)).toBe(true);

    writeBattery(12, 'Charging');
    const final = await h.waitForEnd(all.thread_id);
    expect(final.status).toBe('complete');
    expect(h.sim.calls).toHaveLength(4);
    expect((await items('bulk')).every((w) => w.status === 'applied' && w.attempt === 1)).toBe(true);
    expect((await health()).pressure.active).toEqual([]);
    expect(await pressureGauge('battery')).toBe(0);
  });

  it('CPU busy over the threshold for `cpu.for`: bulk work pauses and claims slow down, interactive goes on; memory low does the same', async () => {
    h = await Harness.start();
    h.writeConfig({
      ...FAST_RETRY,
      pressure: { probe_interval: '50ms', cpu: { threshold: 0.8, for: '200ms', claim_interval: '300ms' }, memory: { min_available_bytes: 2 ** 30 } },
    });
    await h.importProject(project('bulk', 2));
    await h.importProject(project('live', 1));
    const cpu = simulateCpu(0.95);
    stopCpu = cpu.stop;
    const hj = await waitUntil(async () => {
      const x = await health();
      return x.pressure.active.includes('cpu') ? x : null;
    }, 'CPU pressure in health');
    expect(hj.pressure.cpu).toMatchObject({ threshold: 0.8, for_ms: 200, high: true });
    expect(hj.pressure.cpu.busy).toBeCloseTo(0.95, 1);
    expect(hj.pressure).toMatchObject({ paused: ['bulk', 'scheduled'], claim_interval_ms: 300 });

    const all = await h.json<CommandJson>(['generate-all', '--project', 'bulk']);
    const live = await h.json<CommandJson>(['generate-epic', '--project', 'live', '--epic', 'E1']);
    expect((await h.waitForEnd(live.thread_id)).status).toBe('complete');
    await new Promise((r) => setTimeout(r, 500));
    expect(h.sim.calls).toHaveLength(1);

    // The CPU calms down; memory runs low instead: still paused.
    writeFileSync(join(root(), 'proc', 'meminfo'), `MemTotal: 16000000 kB\nMemAvailable: ${2 ** 20 / 2} kB\n`);
    cpu.setBusy(0.1);
    await waitUntil(async () => {
      const x = await health();
      return x.pressure.active.join() === 'memory' ? x : null;
    }, 'memory pressure alone');
    await new Promise((r) => setTimeout(r, 300));
    expect(h.sim.calls).toHaveLength(1);

    writeFileSync(join(root(), 'proc', 'meminfo'), `MemTotal: 16000000 kB\nMemAvailable: 8000000 kB\n`);
    expect((await h.waitForEnd(all.thread_id)).status).toBe('complete');
    expect((await items('bulk')).every((w) => w.status === 'applied' && w.attempt === 1)).toBe(true);
  });
});
