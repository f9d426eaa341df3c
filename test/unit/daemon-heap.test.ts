/**
 * The daemon's old-space cap (cli/daemon-heap.ts, issue 20 target 3): given in NODE_OPTIONS where it lowers
 * the heap limit V8 gives a node process here, never over a heap size the user set.
 */
import { execFile } from 'node:child_process';
import { getHeapStatistics } from 'node:v8';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { capLowersHeapLimit, daemonEnv, daemonNodeOptions, OLD_SPACE_CAP, setsHeapSize } from '../../src/cli/daemon-heap.js';

const MiB = 2 ** 20;
const run = promisify(execFile);

/** `heap_size_limit` of a node started here with `flags` and without this process's NODE_OPTIONS. */
async function heapLimitOf(flags: string[]): Promise<number> {
  const { stdout } = await run(process.execPath, [...flags, '-p', 'v8.getHeapStatistics().heap_size_limit'], {
    env: { ...process.env, NODE_OPTIONS: '' },
  });
  return Number(stdout);
}

describe('the daemon heap cap', () => {
  it("is 1 MiB under V8's 2048 MiB cut-off for the growing factor 4", () => {
    expect(OLD_SPACE_CAP).toBe('--max-old-space-size=2047');
  });

  it("is given where it lowers V8's own limit, after the user's other node options", () => {
    expect(daemonNodeOptions(undefined, true)).toBe(OLD_SPACE_CAP);
    expect(daemonNodeOptions('--enable-source-maps', true)).toBe(`--enable-source-maps ${OLD_SPACE_CAP}`);
    expect(daemonNodeOptions(undefined, false)).toBeUndefined();
    expect(daemonNodeOptions('--enable-source-maps', false)).toBe('--enable-source-maps');
  });

  it('a heap size the user set always wins', () => {
    for (const own of ['--max-old-space-size=6024', '--max_old_space_size=3000', '--trace-gc --max-heap-size=4096']) {
      expect(setsHeapSize(own)).toBe(true);
      expect(daemonNodeOptions(own, true)).toBe(own);
      expect(daemonEnv({ NODE_OPTIONS: own }, true).NODE_OPTIONS).toBe(own);
    }
    expect(setsHeapSize('--max-semi-space-size=8')).toBe(false);
  });

  it("decides from V8's own limit here: lowers it exactly when this process's limit is above the cap's", async () => {
    // This test process runs on V8's defaults, as the CLI does.
    const own = getHeapStatistics().heap_size_limit;
    const lowers = await capLowersHeapLimit();
    // The cap's heap_size_limit is 2047 MiB plus a young generation of at most a few hundred MiB.
    if (own > 2600 * MiB) expect(lowers).toBe(true);
    if (own <= 2047 * MiB) expect(lowers).toBe(false);
    expect(daemonEnv({}, lowers).NODE_OPTIONS).toBe(lowers ? OLD_SPACE_CAP : undefined);
  });

  it("agrees with V8 here: true exactly when a node on V8's defaults gets a higher limit than one with the cap (review-merge T1)", async () => {
    // Two nodes started here by the test itself, not by the code under test: the host's own answer.
    const [defaults, capped] = await Promise.all([heapLimitOf([]), heapLimitOf([OLD_SPACE_CAP])]);
    expect(Number.isFinite(defaults) && Number.isFinite(capped)).toBe(true);
    expect(await capLowersHeapLimit()).toBe(defaults > capped);
  });

  it('gives the same answer in a process whose own NODE_OPTIONS set a heap size (review-merge R1)', async () => {
    // A fresh process (the answer is memoized per process) started as a shell with a heap size in NODE_OPTIONS would start it.
    const source = new URL('../../src/cli/daemon-heap.ts', import.meta.url).href;
    const script = `import(${JSON.stringify(source)}).then(async (m) => console.log(await m.capLowersHeapLimit()))`;
    const { stdout } = await run(process.execPath, ['--import', 'tsx', '-e', script], {
      env: { ...process.env, NODE_OPTIONS: '--max-old-space-size=1024' },
    });
    expect(stdout.trim()).toBe(String(await capLowersHeapLimit()));
  });
});
