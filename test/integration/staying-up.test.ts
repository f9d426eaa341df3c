/**
 * Staying up (issue 14, items 5, 8, 9): another local user cannot keep the daemon from starting; idle,
 * silent and slow connections cannot exhaust it; a huge request body is refused before it is read.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync, realpathSync, statSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { CLI, Harness, waitForExit, waitUntil } from '../helpers/harness.js';

let h: Harness;
const children: ChildProcess[] = [];
const sockets: net.Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  for (const c of children.splice(0)) if (c.exitCode === null) c.kill('SIGKILL');
  await h?.cleanup();
});

function rssBytes(pid: number): number {
  return Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) * 1024;
}

/** `combine daemon run` in the foreground, optionally under a lower open-files limit. */
async function runDaemon(prefix: string[] = []): Promise<ChildProcess> {
  const [cmd, ...args] = [...prefix, process.execPath, CLI, 'daemon', 'run'];
  const child = spawn(cmd!, args, { env: h.env, stdio: ['ignore', 'ignore', 'pipe'] });
  children.push(child);
  await waitUntil(async () => (await h.cli(['health', '--no-autostart'])).code !== 3 || child.exitCode !== null, 'the daemon to answer');
  return child;
}

/** Opens `n` connections to the daemon's socket that never send a byte. */
async function silentConnections(n: number): Promise<{ closed: () => number }> {
  let closed = 0;
  for (let i = 0; i < n; i++) {
    const s = net.connect(join(h.home, 'combine.sock'));
    s.on('error', () => {});
    s.on('close', () => closed++);
    s.resume(); // read, so the server's close is seen
    sockets.push(s);
    await new Promise<void>((r) => {
      s.once('connect', () => r());
      s.once('close', () => r());
    });
  }
  return { closed: () => closed };
}

describe('the one-daemon lock', () => {
  it('cannot be taken by another local user: binding the old abstract name as nobody does not stop the daemon', async () => {
    h = await Harness.start();
    const oldName = `\0combine-daemon-${createHash('sha256').update(realpathSync(h.home)).digest('hex').slice(0, 32)}`;
    const squatter = spawn(
      'setpriv',
      [
        '--reuid=65534',
        '--regid=65534',
        '--clear-groups',
        process.execPath,
        '-e',
        `require('net').createServer().listen(${JSON.stringify(oldName)}, () => console.log('bound'))`,
      ],
      {
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    children.push(squatter);
    await new Promise<void>((resolve, reject) => {
      squatter.stdout!.on('data', (d) => String(d).includes('bound') && resolve());
      squatter.once('exit', (code) => reject(new Error(`the squatter exited ${code}`)));
    });
    const r = await h.cli(['daemon', 'start', '--json']);
    expect(r.code, r.stderr).toBe(0);
    expect((await h.json<{ ready: boolean }>(['health'])).ready).toBe(true);
    expect(statSync(join(h.home, 'daemon.lock')).mode & 0o777).toBe(0o600);
  });

  it('is atomic between two daemons starting together, and a SIGKILL releases it at once', async () => {
    h = await Harness.start();
    await h.json(['project', 'list']); // creates the home and its database
    await h.stopDaemon();
    const a = spawn(process.execPath, [CLI, 'daemon', 'run'], { env: h.env, stdio: ['ignore', 'ignore', 'pipe'] });
    const b = spawn(process.execPath, [CLI, 'daemon', 'run'], { env: h.env, stdio: ['ignore', 'ignore', 'pipe'] });
    children.push(a, b);
    let stderr = '';
    for (const c of [a, b]) c.stderr!.on('data', (d) => (stderr += d));
    const loser = await Promise.race([a, b].map((c) => new Promise<ChildProcess>((r) => c.once('exit', () => r(c)))));
    expect(loser.exitCode).toBe(1);
    expect(stderr).toContain('a daemon is already running');
    const winner = loser === a ? b : a;
    await waitUntil(async () => (await h.cli(['health', '--no-autostart'])).code === 0, 'the winner to serve');
    expect(winner.exitCode).toBeNull();

    winner.kill('SIGKILL');
    await waitForExit(winner.pid!);
    const restarted = await h.cli(['daemon', 'start', '--json']);
    expect(restarted.code, `${restarted.stderr}\n${h.logText()}`).toBe(0);
  });
});

describe('connections', () => {
  it('closes connections that send nothing, and answers a request whose headers never finish with 408', async () => {
    h = await Harness.start();
    h.writeConfig({ api: { header_timeout: '500ms' } });
    await h.json(['project', 'list']);
    const silent = await silentConnections(20);
    const slow = net.connect(join(h.home, 'combine.sock'));
    sockets.push(slow);
    slow.on('error', () => {});
    let answer = '';
    slow.on('data', (d) => (answer += d));
    slow.write('GET /health HTTP/1.1\r\nHost: x\r\n'); // and never the blank line
    await waitUntil(() => silent.closed() === 20, 'the silent connections to be closed', 10_000);
    await waitUntil(() => answer.startsWith('HTTP/1.1 408'), 'the 408', 10_000);
    expect((await h.cli(['health'])).code).toBe(0);
  });

  it('over the connection cap, the oldest idle connections make room: commands still work at the open-files limit', async () => {
    h = await Harness.start();
    // The default cap (512) under an open-files limit the connections alone would exhaust.
    const daemon = await runDaemon(['prlimit', '--nofile=1024:1024']);
    const silent = await silentConnections(1500);
    await waitUntil(() => silent.closed() >= 1500 - 512, 'the oldest idle connections to be closed');
    const health = await h.cli(['health', '--no-autostart']);
    expect(health.code, health.stderr).toBe(0);
    expect((await h.cli(['threads', '--no-autostart'])).code).toBe(0);
    expect(daemon.exitCode).toBeNull();
  });
});

describe('request bodies', () => {
  it('a 100 MB body is refused with 413 and never kept; the daemon does not grow', async () => {
    h = await Harness.start();
    await h.json(['project', 'list']);
    const pid = h.daemonPid()!;
    const sock = net.connect(join(h.home, 'combine.sock'));
    sockets.push(sock);
    const size = 100 * 2 ** 20;
    let answer = '';
    sock.on('data', (d) => (answer += d));
    sock.on('error', () => {});
    sock.write(`POST /generate.epic HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${size}\r\n\r\n`);
    const chunk = Buffer.alloc(2 ** 20, 0x20);
    for (let sent = 0; sent < size && !sock.destroyed; sent += chunk.length) {
      if (!sock.write(chunk))
        await new Promise((r) => {
          sock.once('drain', r);
          sock.once('close', r);
        });
    }
    await waitUntil(() => answer.includes('\r\n\r\n{'), 'the answer');
    expect(answer).toMatch(/^HTTP\/1.1 413/);
    expect(answer).toContain('over the 1 MiB limit of this endpoint (api.max_body_bytes)');
    expect(rssBytes(pid)).toBeLessThan(250 * 2 ** 20);
    expect((await h.cli(['health'])).code).toBe(0);
  });

  it('a body without a length is cut off at the limit too', async () => {
    h = await Harness.start();
    await h.json(['project', 'list']);
    const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = http.request(
        {
          socketPath: join(h.home, 'combine.sock'),
          path: '/generate.epic',
          method: 'POST',
          headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked' },
        },
        (res) => {
          let body = '';
          res.on('data', (d) => (body += d));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        },
      );
      req.on('error', reject);
      // Writes still pending when the daemon cuts the request off fail after the answer: expected.
      req.on('socket', (sock) => sock.on('error', () => {}));
      const chunk = Buffer.alloc(256 * 1024, 0x20);
      for (let i = 0; i < 20; i++) req.write(chunk);
      req.end();
    });
    expect(answer.status).toBe(413);
    expect(answer.body).toContain('size limit');
  });

  it('project import takes files over 1 MiB up to api.max_import_bytes, and names the limit past it (exit 2)', async () => {
    h = await Harness.start();
    const big = join(h.home, 'big.json');
    writeFileSync(big, JSON.stringify({ id: 'big', name: 'Big', epics: [{ id: 'E1', title: 'Large', description: 'x'.repeat(2 * 2 ** 20) }] }));
    expect((await h.cli(['project', 'import', big])).code).toBe(0);
    await h.stopDaemon();
    h.writeConfig({ api: { max_import_bytes: 2 ** 20 } });
    const refused = await h.cli(['project', 'import', big]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('over the 1 MiB limit of this endpoint (api.max_import_bytes)');
  });
});
