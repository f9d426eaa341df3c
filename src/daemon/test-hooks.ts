/**
 * The test-only seam. Crash tests set COMBINE_CRASH_AT=<point> (core/crash.ts) to make the daemon kill
 * itself with SIGKILL at that point of the pipeline.
 *
 * `__COMBINE_TEST_HOOKS__` is an esbuild `define`: false in the shipped bundle (dist/), so the branch
 * below and everything only it uses — the variable's name, `process.kill` — are dropped from it; true in
 * the test bundle (dist-test/, `node scripts/build.mjs --test-hooks`), which differs from the shipped one
 * by this constant alone. Run from source (vitest in process, tsx) it is undefined: hooks off.
 */
import { type CrashAt, type CrashPoint, neverCrash } from '../core/crash.js';
import type { Logger } from '../core/logger.js';

declare const __COMBINE_TEST_HOOKS__: boolean | undefined;

export function crashHooks(env: NodeJS.ProcessEnv, logger: Logger): CrashAt {
  return typeof __COMBINE_TEST_HOOKS__ !== 'undefined' && __COMBINE_TEST_HOOKS__ ? killAt(env, logger) : neverCrash;
}

function killAt(env: NodeJS.ProcessEnv, logger: Logger): CrashAt {
  const point = env.COMBINE_CRASH_AT;
  if (!point) return neverCrash;
  const kill = () => {
    logger.warn({ point }, 'COMBINE_CRASH_AT: exiting abruptly');
    process.kill(process.pid, 'SIGKILL');
  };
  return (at: CrashPoint) => {
    if (at !== point) return;
    // during_call: the request is on its way; die while it is in flight.
    if (at === 'during_call') setTimeout(kill, 200);
    else kill();
  };
}
