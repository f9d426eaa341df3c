/**
 * Drives one racer of the schedule race tests (schedule-race-worker.ts in its own OS process): start it,
 * wait for it to be ready, tell it to tick period after period, and read its tally at the end.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { join } from 'node:path';
import { ROOT } from './harness.js';

/** What one racer saw: periods it won or lost at the tick, and the runs its scheduler started. */
export interface Tally {
  won: number;
  lost: number;
  lost_at_insert: number;
  started: number;
  won_periods: string[];
}

export interface Racer {
  child: ChildProcessWithoutNullStreams;
  ready: Promise<void>;
  /** Resolves when the racer has printed its n-th `ticked`. */
  ticked(n: number): Promise<void>;
  result: Promise<Tally>;
}

/** Spawns a racer on `home` with `env` (the simulator's URL, and COMBINE_DATABASE_URL on Postgres). */
export function startRacer(home: string, env: NodeJS.ProcessEnv, first: number, periods: number): Racer {
  const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'test/helpers/schedule-race-worker.ts'), home, String(first), String(periods)], {
    cwd: ROOT,
    env: { ...env, COMBINE_HOME: home },
  });
  let out = '';
  let err = '';
  const waiters: { n: number; resolve: () => void; reject: (e: Error) => void }[] = [];
  const tickedCount = () => (out.match(/^ticked$/gm) ?? []).length;
  child.stderr.on('data', (d) => (err += d));
  const ready = new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (d) => {
      out += d;
      if (out.startsWith('ready\n')) resolve();
      for (const w of waiters.splice(0))
        if (tickedCount() >= w.n) w.resolve();
        else waiters.push(w);
    });
    child.once('exit', (code) => reject(new Error(`racer exited ${code} before it was ready: ${err}`)));
  });
  let exited: Error | null = null;
  child.once('exit', (code) => {
    exited = new Error(`racer exited ${code} while ticking: ${err}`);
    for (const w of waiters.splice(0)) w.reject(exited);
  });
  // A racer that dies mid-race fails the test with its stderr, instead of leaving it waiting for `ticked`.
  const ticked = (n: number) =>
    new Promise<void>((resolve, reject) => (tickedCount() >= n ? resolve() : exited ? reject(exited) : waiters.push({ n, resolve, reject })));
  const result = new Promise<Tally>((resolve, reject) => {
    child.once('exit', (code) => {
      if (code !== 0) return reject(new Error(`racer exited ${code}: ${err}`));
      resolve(JSON.parse(out.split('\n').filter(Boolean).pop()!) as Tally);
    });
  });
  return { child, ready, ticked, result };
}

/** Ticks every racer through `periods` periods in lockstep, so they really contend for each period's row. */
export async function tickInLockstep(racers: Racer[], periods: number): Promise<Tally[]> {
  await Promise.all(racers.map((r) => r.ready));
  for (let i = 1; i <= periods; i++) {
    for (const r of racers) r.child.stdin.write('go\n');
    await Promise.all(racers.map((r) => r.ticked(i)));
  }
  return Promise.all(racers.map((r) => r.result));
}
