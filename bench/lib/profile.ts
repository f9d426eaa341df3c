/**
 * BENCH_PROFILE_DIR=<dir>: CPU profiles of the measured phase only (not of set-up), written as
 * <dir>/<name>-<n>.cpuprofile for Chrome DevTools or `node bench/profile-summary.mjs`. The daemon
 * itself is profiled with `node --cpu-prof` (see lib/daemon.ts).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { join } from 'node:path';

let n = 0;

export async function startProfiler(): Promise<{ stop(name: string): Promise<void> }> {
  const dir = process.env.BENCH_PROFILE_DIR;
  if (!dir) return { stop: async () => {} };
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 100 });
  await session.post('Profiler.start');
  return {
    async stop(name) {
      const { profile } = await session.post('Profiler.stop');
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, `${name}-${++n}.cpuprofile`), JSON.stringify(profile));
      session.disconnect();
    },
  };
}
