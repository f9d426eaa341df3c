/**
 * What the machine says about itself, read from Linux's files under a root directory (`/` by default;
 * config `pressure.root` or COMBINE_PRESSURE_ROOT point elsewhere, so a test writes the signals
 * instead of loading the machine):
 *
 *   proc/stat                  CPU time counters: the busy share since the previous reading
 *   proc/meminfo               MemAvailable, MemTotal
 *   sys/class/power_supply/*   a `type` of Battery: its `capacity` (percent) and `status` (Discharging …)
 *
 * A file that is missing or unreadable gives "unknown" (null), which never causes pressure: a machine
 * without a battery, or a system without /proc, runs as if unloaded.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface PressureSignals {
  /** Busy share of all CPUs (0–1) since the previous reading; null on the first reading or when unknown. */
  cpuBusy: number | null;
  memAvailableBytes: number | null;
  memTotalBytes: number | null;
  /** null: no battery. */
  battery: { percent: number; discharging: boolean } | null;
}

export interface PressureProbe {
  read(): PressureSignals;
}

function readText(path: string): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return null;
  }
}

/** `cpu  user nice system idle iowait irq softirq steal …` → total and idle (idle + iowait) jiffies. */
export function parseCpuTimes(stat: string): { total: number; idle: number } | null {
  const line = stat.split('\n').find((l) => l.startsWith('cpu '));
  if (!line) return null;
  const n = line.trim().split(/\s+/).slice(1, 9).map(Number);
  if (n.length < 4 || n.some((v) => !Number.isFinite(v))) return null;
  return { total: n.reduce((a, b) => a + b, 0), idle: n[3]! + (n[4] ?? 0) };
}

/** A `Key:   12345 kB` line of /proc/meminfo, in bytes. */
export function meminfoBytes(meminfo: string, key: string): number | null {
  const m = new RegExp(`^${key}:\\s+(\\d+)\\s*kB`, 'm').exec(meminfo);
  return m ? Number(m[1]) * 1024 : null;
}

function readBattery(root: string): PressureSignals['battery'] {
  const dir = join(root, 'sys', 'class', 'power_supply');
  let names: string[];
  try {
    names = readdirSync(dir).sort();
  } catch {
    return null;
  }
  for (const name of names) {
    if (readText(join(dir, name, 'type'))?.trim() !== 'Battery') continue;
    const percent = Number(readText(join(dir, name, 'capacity'))?.trim());
    if (!Number.isFinite(percent)) continue;
    return { percent, discharging: readText(join(dir, name, 'status'))?.trim() === 'Discharging' };
  }
  return null;
}

/** The probe of the machine (or of a directory laid out like one). */
export function systemProbe(root: string): PressureProbe {
  let previous: { total: number; idle: number } | null = null;
  return {
    read() {
      const stat = readText(join(root, 'proc', 'stat'));
      const times = stat === null ? null : parseCpuTimes(stat);
      let cpuBusy: number | null = null;
      if (times && previous && times.total > previous.total) {
        cpuBusy = Math.min(1, Math.max(0, 1 - (times.idle - previous.idle) / (times.total - previous.total)));
      }
      if (times) previous = times;
      const meminfo = readText(join(root, 'proc', 'meminfo'));
      return {
        cpuBusy,
        memAvailableBytes: meminfo === null ? null : meminfoBytes(meminfo, 'MemAvailable'),
        memTotalBytes: meminfo === null ? null : meminfoBytes(meminfo, 'MemTotal'),
        battery: readBattery(root),
      };
    },
  };
}
