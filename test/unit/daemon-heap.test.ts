/**
 * The daemon's old-space flag (cli/daemon-heap.ts `oldSpaceFlags`, issue 20 target 3): it lowers V8's heap
 * limit only where V8's own would be 2 GiB or more (a quarter of a host's memory, from 8 GiB), never raises it.
 */
import { describe, expect, it } from 'vitest';
import { DAEMON_NODE_FLAGS, oldSpaceFlags } from '../../src/cli/daemon-heap.js';

const GiB = 2 ** 30;

describe('the daemon heap flags', () => {
  it('a host with 8 GiB of memory or more: the old space at 2047 MiB (V8 grows it by at most 2× its live size)', () => {
    expect(oldSpaceFlags(8 * GiB)).toEqual(['--max-old-space-size=2047']);
    expect(oldSpaceFlags(24 * GiB)).toEqual(['--max-old-space-size=2047']);
  });

  it('a smaller host keeps the limit V8 gives it (a quarter of its memory), which the flag would raise', () => {
    expect(oldSpaceFlags(8 * GiB - 1)).toEqual([]);
    expect(oldSpaceFlags(2 * GiB)).toEqual([]);
  });

  it('the young generation stays at 2 × 8 MiB on every host, first', () => {
    expect(DAEMON_NODE_FLAGS[0]).toBe('--max-semi-space-size=8');
  });
});
