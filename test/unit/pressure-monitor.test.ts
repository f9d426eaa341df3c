/**
 * The pressure monitor's verdicts (issue 16, item 3) on a fake clock, with the signals given through the
 * probe interface: CPU must stay high for `cpu.for` before it counts, memory and battery count at once,
 * a large WAL refuses commands and asks for a checkpoint. The probe of the machine reads /proc files:
 * its parsing is checked on real file contents.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { resolveObserve } from '../../src/daemon/config/observe.js';
import { PressureMonitor, type PressureSignal } from '../../src/daemon/pressure/monitor.js';
import { systemProbe, type PressureSignals } from '../../src/daemon/pressure/probe.js';
import { PRIORITY_INTERACTIVE } from '../../src/domain/operations.js';

const GiB = 2 ** 30;
const idle: PressureSignals = { cpuBusy: 0.1, memAvailableBytes: 8 * GiB, memTotalBytes: 16 * GiB, battery: null };

function setup(overrides: Record<string, unknown> = {}) {
  let now = 1_000_000;
  let signals = idle;
  let wal = 0;
  const changes: PressureSignal[][] = [];
  let checkpoints = 0;
  const config = resolveObserve(
    { pressure: { cpu: { threshold: 0.8, for: 30_000, claim_interval: 2_000 }, wal: { max_bytes: 1000 }, ...overrides } },
    {},
  ).pressure;
  const monitor = new PressureMonitor({
    config,
    probe: { read: () => signals },
    clock: { now: () => now },
    walBytes: () => wal,
    checkpoint: async () => {
      checkpoints++;
    },
    onChange: (active) => changes.push([...active]),
  });
  return {
    monitor,
    changes,
    checkpoints: () => checkpoints,
    set(s: Partial<PressureSignals>) {
      signals = { ...signals, ...s };
    },
    setWal(bytes: number) {
      wal = bytes;
    },
    advance(ms: number) {
      now += ms;
    },
  };
}

describe('pressure monitor', () => {
  it('CPU over the threshold counts only after `cpu.for`: then claims slow down and only interactive work is claimed', () => {
    const t = setup();
    t.monitor.sample();
    expect(t.monitor.claimLimits()).toEqual({ minIntervalMs: 0 });
    t.set({ cpuBusy: 0.95 });
    t.monitor.sample();
    t.advance(29_999);
    t.monitor.sample();
    expect(t.monitor.has('cpu')).toBe(false); // a spike is not pressure
    t.advance(1);
    t.monitor.sample();
    expect(t.monitor.has('cpu')).toBe(true);
    t.set({ cpuBusy: null }); // an unknown reading (a file read mid-write) changes nothing
    t.monitor.sample();
    expect(t.monitor.has('cpu')).toBe(true);
    t.set({ cpuBusy: 0.95 });
    expect(t.monitor.claimLimits()).toEqual({ maxPriority: PRIORITY_INTERACTIVE, minIntervalMs: 2_000 });
    expect(t.monitor.snapshot()).toMatchObject({ active: ['cpu'], paused: ['bulk', 'scheduled'], claim_interval_ms: 2_000, accepting_commands: true });
    // One reading under the threshold ends it, and the wait starts over.
    t.set({ cpuBusy: 0.5 });
    t.monitor.sample();
    expect(t.monitor.claimLimits()).toEqual({ minIntervalMs: 0 });
    t.set({ cpuBusy: 0.95 });
    t.monitor.sample();
    expect(t.monitor.has('cpu')).toBe(false);
    expect(t.changes).toEqual([['cpu'], []]);
  });

  it('low memory pauses bulk work and slows claims at once; a discharging battery under min_percent leaves only interactive work', () => {
    const t = setup({ memory: { min_available_bytes: GiB }, battery: { min_percent: 20 } });
    t.set({ memAvailableBytes: GiB - 1 });
    t.monitor.sample();
    expect(t.monitor.claimLimits()).toEqual({ maxPriority: PRIORITY_INTERACTIVE, minIntervalMs: 2_000 });
    t.set({ memAvailableBytes: 2 * GiB, battery: { percent: 15, discharging: false } });
    t.monitor.sample();
    expect(t.monitor.claimLimits()).toEqual({ minIntervalMs: 0 }); // charging: no pressure
    t.set({ battery: { percent: 15, discharging: true } });
    t.monitor.sample();
    expect(t.monitor.claimLimits()).toEqual({ maxPriority: PRIORITY_INTERACTIVE, minIntervalMs: 0 });
    expect(t.monitor.snapshot().battery).toEqual({ present: true, percent: 15, discharging: true, min_percent: 20, low: true });
    t.set({ battery: { percent: 25, discharging: true } });
    t.monitor.sample();
    expect(t.monitor.has('battery')).toBe(false);
  });

  it('a WAL over its limit refuses commands with BACKPRESSURE and asks for a checkpoint; under it, commands are accepted again', () => {
    const t = setup();
    t.setWal(1001);
    t.monitor.sample();
    expect(t.checkpoints()).toBe(1);
    expect(() => t.monitor.assertAcceptingCommands()).toThrow(
      /BACKPRESSURE: the write-ahead log is 1001 bytes, over pressure\.wal\.max_bytes \(1000\); nothing was stored/,
    );
    expect(t.monitor.claimLimits()).toEqual({ minIntervalMs: 0 }); // work already accepted goes on
    t.setWal(0);
    t.monitor.sample();
    expect(() => t.monitor.assertAcceptingCommands()).not.toThrow();
    expect(t.monitor.snapshot().wal).toEqual({ bytes: 0, max_bytes: 1000, over: false });
  });

  it('unknown signals (no /proc, no battery) never cause pressure', () => {
    const t = setup();
    t.set({ cpuBusy: null, memAvailableBytes: null, memTotalBytes: null, battery: null });
    t.monitor.sample();
    t.advance(60_000);
    t.monitor.sample();
    expect(t.monitor.snapshot().active).toEqual([]);
  });
});

describe('the machine probe', () => {
  let root: string;
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it('reads the CPU busy share between two readings, MemAvailable, and the first battery', () => {
    root = mkdtempSync(join(tmpdir(), 'cmb-probe-'));
    mkdirSync(join(root, 'proc'));
    const stat = (user: number, idleJiffies: number) => `cpu  ${user} 0 0 ${idleJiffies} 0 0 0 0 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\nintr 1\n`;
    writeFileSync(join(root, 'proc', 'stat'), stat(100, 900));
    writeFileSync(join(root, 'proc', 'meminfo'), 'MemTotal:       16384000 kB\nMemFree:          100 kB\nMemAvailable:    2048000 kB\n');
    for (const [name, type] of [
      ['AC', 'Mains'],
      ['BAT0', 'Battery'],
    ]) {
      mkdirSync(join(root, 'sys', 'class', 'power_supply', name!), { recursive: true });
      writeFileSync(join(root, 'sys', 'class', 'power_supply', name!, 'type'), `${type}\n`);
    }
    writeFileSync(join(root, 'sys', 'class', 'power_supply', 'BAT0', 'capacity'), '42\n');
    writeFileSync(join(root, 'sys', 'class', 'power_supply', 'BAT0', 'status'), 'Discharging\n');
    const probe = systemProbe(root);
    expect(probe.read()).toEqual({
      cpuBusy: null,
      memAvailableBytes: 2048000 * 1024,
      memTotalBytes: 16384000 * 1024,
      battery: { percent: 42, discharging: true },
    });
    writeFileSync(join(root, 'proc', 'stat'), stat(190, 910)); // 90 busy of 100 jiffies
    expect(probe.read().cpuBusy).toBeCloseTo(0.9);
    expect(systemProbe(join(root, 'missing')).read()).toEqual({ cpuBusy: null, memAvailableBytes: null, memTotalBytes: null, battery: null });
  });
});
