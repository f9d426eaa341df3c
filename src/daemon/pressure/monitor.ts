/**
 * Resource pressure (ADR-002 §4-2), sampled every `pressure.probe_interval`:
 *
 *   CPU busy over `cpu.threshold` for `cpu.for`   claim rounds at most every `cpu.claim_interval`;
 *                                                 bulk and scheduled work paused (interactive goes on)
 *   MemAvailable under `memory.min_available_bytes`  the same
 *   on battery, discharging, under `battery.min_percent`  only interactive work
 *   WAL over `wal.max_bytes`                      new commands refused (BACKPRESSURE, nothing stored)
 *                                                 until a checkpoint, asked for at once, shrinks it
 *
 * Paused work stays queued with its attempt: pausing never burns one. Time comes from the injected
 * clock; the timer only decides when to look.
 */
import { PRIORITY_INTERACTIVE } from '../../domain/operations.js';
import { CommandError } from '../../core/errors.js';
import type { PressureConfig } from '../config/observe.js';
import type { Clock } from '../../core/clock.js';
import type { ClaimThrottle } from '../engine/engine.js';
import type { PressureProbe, PressureSignals } from './probe.js';

export const PRESSURE_SIGNALS = ['cpu', 'memory', 'battery', 'wal'] as const;
export type PressureSignal = (typeof PRESSURE_SIGNALS)[number];

export interface PressureOptions {
  config: PressureConfig;
  probe: PressureProbe;
  clock: Clock;
  /** The write-ahead log's size now. */
  walBytes(): number;
  /** Checkpoints the WAL (truncating it when no reader holds an old snapshot). */
  checkpoint(): Promise<unknown>;
  /** The set of active signals changed (the engine is woken when work may resume). */
  onChange(active: readonly PressureSignal[]): void;
}

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

export class PressureMonitor implements ClaimThrottle {
  private signals: PressureSignals = { cpuBusy: null, memAvailableBytes: null, memTotalBytes: null, battery: null };
  private cpuAboveSince: number | null = null;
  private wal = 0;
  private active: PressureSignal[] = [];
  private timer: NodeJS.Timeout | null = null;
  private checkpointing = false;

  constructor(private readonly o: PressureOptions) {}

  start(): void {
    if (!this.o.config.enabled) return;
    this.sample();
    this.timer = setInterval(() => this.sample(), this.o.config.probeIntervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** Reads every signal once and updates the verdicts. */
  sample(): void {
    const c = this.o.config;
    const now = this.o.clock.now();
    this.signals = this.o.probe.read();
    const busy = this.signals.cpuBusy;
    // An unknown reading (a file read mid-write, no time elapsed) neither starts nor ends CPU pressure.
    if (busy !== null) this.cpuAboveSince = busy > c.cpuThreshold ? (this.cpuAboveSince ?? now) : null;
    this.wal = this.o.walBytes();
    const b = this.signals.battery;
    const next: PressureSignal[] = [];
    if (this.cpuAboveSince !== null && now - this.cpuAboveSince >= c.cpuForMs) next.push('cpu');
    if (this.signals.memAvailableBytes !== null && this.signals.memAvailableBytes < c.minAvailableMemoryBytes) next.push('memory');
    if (b?.discharging && b.percent < c.minBatteryPercent) next.push('battery');
    if (this.wal > c.maxWalBytes) next.push('wal');
    if (next.includes('wal')) void this.shrinkWal();
    if (next.join() !== this.active.join()) {
      this.active = next;
      this.o.onChange(next);
    }
  }

  /** A large WAL is checkpointed first (ADR-002: "pause enqueue, checkpoint first"), then looked at again. */
  private async shrinkWal(): Promise<void> {
    if (this.checkpointing) return;
    this.checkpointing = true;
    try {
      await this.o.checkpoint();
    } catch {
      // retried at the next sample
    } finally {
      this.checkpointing = false;
    }
    if (this.timer !== null && this.o.walBytes() <= this.o.config.maxWalBytes) this.sample();
  }

  has(signal: PressureSignal): boolean {
    return this.active.includes(signal);
  }

  claimLimits(): { maxPriority?: number; minIntervalMs: number } {
    const busy = this.has('cpu') || this.has('memory');
    const interactiveOnly = busy || this.has('battery');
    return { ...(interactiveOnly ? { maxPriority: PRIORITY_INTERACTIVE } : {}), minIntervalMs: busy ? this.o.config.cpuClaimIntervalMs : 0 };
  }

  /** Refuses a new command while the WAL is over its limit: nothing is stored, the caller retries later. */
  assertAcceptingCommands(): void {
    if (!this.has('wal')) return;
    throw new CommandError(
      'CONFLICT',
      `BACKPRESSURE: the write-ahead log is ${this.wal} bytes, over pressure.wal.max_bytes (${this.o.config.maxWalBytes}); nothing was stored — try again once a checkpoint has shrunk it`,
      'BACKPRESSURE',
    );
  }

  /** For `health --json` and the gauges. */
  snapshot() {
    const c = this.o.config;
    const s = this.signals;
    const limits = this.claimLimits();
    return {
      enabled: c.enabled,
      active: [...this.active],
      cpu: { busy: s.cpuBusy, threshold: c.cpuThreshold, for_ms: c.cpuForMs, above_since: iso(this.cpuAboveSince), high: this.has('cpu') },
      memory: { available_bytes: s.memAvailableBytes, total_bytes: s.memTotalBytes, min_available_bytes: c.minAvailableMemoryBytes, low: this.has('memory') },
      battery: {
        present: s.battery !== null,
        percent: s.battery?.percent ?? null,
        discharging: s.battery?.discharging ?? null,
        min_percent: c.minBatteryPercent,
        low: this.has('battery'),
      },
      wal: { bytes: this.wal, max_bytes: c.maxWalBytes, over: this.has('wal') },
      paused: limits.maxPriority !== undefined ? ['bulk', 'scheduled'] : [],
      claim_interval_ms: limits.minIntervalMs,
      accepting_commands: !this.has('wal'),
    };
  }
}
export type PressureSnapshot = ReturnType<PressureMonitor['snapshot']>;
