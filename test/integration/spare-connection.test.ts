/**
 * The connection the CLI's probe opens serves its first call (client.ts connectHttp). A loaded CLI can
 * take longer to send that call than the daemon waits for a request's headers: the daemon answers 408 and
 * closes the connection. The call must then still be answered (sent again on a connection of its own),
 * not fail with "cannot reach the combine daemon: write EPIPE" from a daemon that is up.
 *
 * The race is made deterministic, not timed: the test waits until the daemon has closed its end of the
 * spare connection, without letting its own event loop run in between (so the CLI side has not yet seen
 * the close, as a CLI busy loading would not), or until the 408 is there to read.
 *
 * And whatever the cause, a command never ends with exit 0 and nothing printed while it still awaits its
 * answer (main.ts refuseSilentExit).
 */
import { readdirSync, readlinkSync, writeFileSync } from 'node:fs';
import type net from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { connectHttp, openSocket } from '../../src/cli/client.js';
import { Harness } from '../helpers/harness.js';

let h: Harness;
afterEach(async () => {
  await h?.cleanup();
});

/** The socket inodes a process holds open, read synchronously from /proc. */
function socketInodes(pid: number): Set<string> {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const target = readlinkSync(`/proc/${pid}/fd/${fd}`);
      if (target.startsWith('socket:')) inodes.add(target);
    } catch {
      // closed since the listing
    }
  }
  return inodes;
}

/** Blocks this thread (its event loop does not run) until `done`, looking every 10 ms. */
function blockUntil(done: () => boolean, what: string): void {
  const pause = new Int32Array(new SharedArrayBuffer(4));
  for (let i = 0; i < 3000; i++) {
    if (done()) return;
    Atomics.wait(pause, 0, 0, 10);
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** A daemon with a short header timeout, and a spare connection to it (the probe's), as the CLI holds it. */
async function daemonAndSpare(): Promise<{ socket: string; spare: net.Socket; daemonPid: number; before: Set<string> }> {
  h = await Harness.start();
  h.writeConfig({ api: { header_timeout: '300ms' } });
  await h.json(['project', 'list']);
  const daemonPid = h.daemonPid()!;
  const socket = join(h.home, 'combine.sock');
  const before = socketInodes(daemonPid);
  const spare = await openSocket(socket);
  expect(spare).not.toBeNull();
  return { socket, spare: spare!, daemonPid, before };
}

describe('the spare connection of the first call', () => {
  it('closed by the daemon while the CLI did not look: the call is answered on a new connection', async () => {
    const { socket, spare, daemonPid, before } = await daemonAndSpare();
    // The daemon's end of the spare: the socket it holds now that it did not before.
    let daemonEnd: string | undefined;
    blockUntil(() => (daemonEnd = [...socketInodes(daemonPid)].find((s) => !before.has(s))) !== undefined, 'the daemon to accept');
    blockUntil(() => !socketInodes(daemonPid).has(daemonEnd!), 'the daemon to close the spare connection (header timeout)');
    // Still looks open from this side: its 408 and close have not been read yet.
    expect(spare.destroyed || !spare.writable).toBe(false);
    const conn = connectHttp(socket, spare);
    const health = await conn.client.health.query(undefined, { signal: AbortSignal.timeout(10_000) });
    expect(health.checks.database).toBe(true);
  });

  it('answered 408 before the call: the call is answered on a new connection', async () => {
    const { socket, spare } = await daemonAndSpare();
    await new Promise<void>((resolve) => spare.once('readable', resolve));
    expect(spare.readableLength).toBeGreaterThan(0);
    const conn = connectHttp(socket, spare);
    const usage = await conn.client.usage.query({ project_id: null }, { signal: AbortSignal.timeout(10_000) });
    expect(usage.rows).toEqual([]);
  });
});

describe('a command left without an answer', () => {
  it('exits 3 and says so when nothing is left to wait for, never 0 with nothing printed', async () => {
    h = await Harness.start();
    // The probe's spare connection, which no request takes here, holds the CLI until the daemon closes it.
    h.writeConfig({ api: { header_timeout: '300ms' } });
    await h.json(['project', 'list']);
    // Node's own http.request, replaced in the CLI process only, by a preload: a request that never
    // reports anything, as a connection gone without an 'error' would leave it. Nothing of ours is changed.
    const preload = join(h.home, 'silent-requests.cjs');
    writeFileSync(
      preload,
      "const http = require('node:http'); const { EventEmitter } = require('node:events');\n" +
        'http.request = () => Object.assign(new EventEmitter(), { end() {}, destroy() {} });\n',
    );
    const r = await h.cli(['usage', '--json'], { env: { NODE_OPTIONS: `--require ${preload}` } });
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain('the command ended without an answer from the daemon');
    expect(r.code).toBe(3);
  });
});
