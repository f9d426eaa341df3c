/**
 * The systemd user unit `combine daemon install` writes: the daemon in the foreground, started by its own
 * entry (daemon-heap.ts `daemonArgv`: what `combine daemon run` runs, without the CLI's bundle).
 */
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { DAEMON_ENV, daemonArgv, OLD_SPACE_CAP } from './daemon-heap.js';

export interface UnitOptions {
  node: string;
  /** The directory of the built bundles (dist/), where the daemon's entry is. */
  distDir: string;
  home: string;
  metricsPort: number | null;
  /** The heap cap lowers V8's limit here (daemon-heap.ts `capLowersHeapLimit`). */
  capHeap: boolean;
}

/** systemd expands %-specifiers in most settings; a literal % is written %%. */
function escapeValue(v: string): string {
  return v.replace(/%/g, '%%');
}

/** Quotes one ExecStart argument when it needs it (systemd splits on whitespace, honours "…"). */
function arg(v: string): string {
  const escaped = escapeValue(v);
  return /[\s"'\\;]/.test(escaped) ? `"${escaped.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"` : escaped;
}

export function renderUnit(o: UnitOptions): string {
  const exec = [o.node, ...daemonArgv(o.distDir, o.metricsPort !== null ? ['--metrics-port', String(o.metricsPort)] : [])].map(arg).join(' ');
  return [
    '# Written by `combine daemon install`. Secrets (OPENAI_API_KEY) belong in the EnvironmentFile, mode 0600.',
    '[Unit]',
    'Description=combine daemon: durable, audited LLM operations',
    'After=network-online.target',
    'Wants=network-online.target',
    '',
    '[Service]',
    'Type=simple',
    `ExecStart=${exec}`,
    `Environment=${arg(`COMBINE_HOME=${o.home}`)}`,
    // The EnvironmentFile below overrides these (systemd applies it after Environment=): any NODE_OPTIONS in
    // daemon.env replaces the heap cap, even one that sets no heap size (`combine daemon start` keeps the cap
    // after a user's NODE_OPTIONS that sets none: daemon-heap.ts `daemonNodeOptions`).
    ...Object.entries({ ...DAEMON_ENV, ...(o.capHeap && { NODE_OPTIONS: OLD_SPACE_CAP }) }).map(([k, v]) => `Environment=${arg(`${k}=${v}`)}`),
    `EnvironmentFile=-${escapeValue(join(o.home, 'daemon.env'))}`,
    // SIGTERM: stop claiming, drain in-flight calls up to the drain timeout (10 s), exit 0.
    'KillSignal=SIGTERM',
    'TimeoutStopSec=30',
    'Restart=on-failure',
    'RestartSec=5',
    // Exit 2 is a configuration error: restarting cannot fix it.
    'RestartPreventExitStatus=2',
    '',
    '[Install]',
    'WantedBy=default.target',
    '',
  ].join('\n');
}

/** Where user units live: $XDG_CONFIG_HOME/systemd/user, else ~/.config/systemd/user. */
export function userUnitDir(env: NodeJS.ProcessEnv = process.env): string {
  const config = env.XDG_CONFIG_HOME ? resolve(env.XDG_CONFIG_HOME) : join(env.HOME || homedir(), '.config');
  return join(config, 'systemd', 'user');
}

export const UNIT_NAME = 'combine.service';
