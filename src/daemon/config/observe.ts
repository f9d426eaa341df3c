/**
 * The part of the configuration about the machine and the pipeline's own health: resource pressure
 * (`pressure`), the canary (`canary`) and span export (`otel`). Schemas for `config.json` (zod; an error
 * names the field) and their resolved shapes, each with a default.
 */
import { z } from 'zod';
import { duration } from './limits.js';

const MiB = 2 ** 20;

export const DEFAULT_PRESSURE = {
  probeIntervalMs: 5_000,
  cpuThreshold: 0.8,
  cpuForMs: 30_000,
  cpuClaimIntervalMs: 1_000,
  minAvailableMemoryBytes: 256 * MiB,
  minBatteryPercent: 20,
  maxWalBytes: 512 * MiB,
};
export const DEFAULT_CANARY_INTERVAL_MS = 5 * 60_000;
export const DEFAULT_CANARY_TIMEOUT_MS = 60_000;

export const observeConfigFileSchema = {
  /** System pressure (ADR-002 §4): what makes the daemon claim less, pause bulk work or refuse commands. */
  pressure: z
    .object({
      enabled: z.boolean().optional(),
      probe_interval: duration.optional(),
      /** Where `proc/` and `sys/class/power_supply/` are read (default `/`). */
      root: z.string().min(1).max(4096).optional(),
      cpu: z
        .object({
          /** Busy share of all CPUs (0–1) above which… */
          threshold: z.number().min(0).max(1).optional(),
          /** …for this long, claims slow down and bulk and scheduled work pause. */
          for: duration.optional(),
          /** The least time between two claim rounds while the CPU is busy. */
          claim_interval: duration.optional(),
        })
        .strict()
        .optional(),
      memory: z
        .object({ min_available_bytes: z.number().int().min(0).optional() })
        .strict()
        .optional(),
      battery: z
        .object({ min_percent: z.number().min(0).max(100).optional() })
        .strict()
        .optional(),
      /** Over this write-ahead log size, new commands are refused (BACKPRESSURE) until a checkpoint shrinks it. */
      wal: z
        .object({ max_bytes: z.number().int().min(0).optional() })
        .strict()
        .optional(),
    })
    .strict()
    .optional(),
  /** A synthetic work item through the whole pipeline, on a zero-cost built-in provider (0: off). */
  canary: z.object({ interval: duration.optional(), timeout: duration.optional() }).strict().optional(),
  /** OTLP/HTTP span export (off unless `endpoint` is set): command → claim → call → apply. */
  otel: z
    .object({
      /** The collector's base URL (`http://127.0.0.1:4318`) or its traces URL (`…/v1/traces`). */
      endpoint: z.url().optional(),
      service_name: z.string().min(1).max(100).optional(),
    })
    .strict()
    .optional(),
};

type ObserveFile = { [K in keyof typeof observeConfigFileSchema]?: z.infer<(typeof observeConfigFileSchema)[K]> };

export interface PressureConfig {
  enabled: boolean;
  probeIntervalMs: number;
  root: string;
  cpuThreshold: number;
  cpuForMs: number;
  cpuClaimIntervalMs: number;
  minAvailableMemoryBytes: number;
  minBatteryPercent: number;
  maxWalBytes: number;
}

export interface ObserveConfig {
  pressure: PressureConfig;
  canary: { intervalMs: number; timeoutMs: number };
  otel: { endpoint: string | null; serviceName: string };
}

/**
 * `COMBINE_PRESSURE_ROOT` is a test/debug switch: it points the probes at another root (a directory
 * whose `proc/stat`, `proc/meminfo` and `sys/class/power_supply/*` a test writes), over config `pressure.root`.
 */
export function resolveObserve(file: ObserveFile, env: NodeJS.ProcessEnv): ObserveConfig {
  const p = file.pressure ?? {};
  const d = DEFAULT_PRESSURE;
  return {
    pressure: {
      enabled: p.enabled ?? true,
      probeIntervalMs: Math.max(50, p.probe_interval ?? d.probeIntervalMs),
      root: env.COMBINE_PRESSURE_ROOT || p.root || '/',
      cpuThreshold: p.cpu?.threshold ?? d.cpuThreshold,
      cpuForMs: p.cpu?.for ?? d.cpuForMs,
      cpuClaimIntervalMs: p.cpu?.claim_interval ?? d.cpuClaimIntervalMs,
      minAvailableMemoryBytes: p.memory?.min_available_bytes ?? d.minAvailableMemoryBytes,
      minBatteryPercent: p.battery?.min_percent ?? d.minBatteryPercent,
      maxWalBytes: p.wal?.max_bytes ?? d.maxWalBytes,
    },
    canary: { intervalMs: file.canary?.interval ?? DEFAULT_CANARY_INTERVAL_MS, timeoutMs: file.canary?.timeout ?? DEFAULT_CANARY_TIMEOUT_MS },
    otel: { endpoint: file.otel?.endpoint ?? null, serviceName: file.otel?.service_name ?? 'combine' },
  };
}
