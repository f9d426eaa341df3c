/** The daemon as a process: one per home, restarts keep everything, a dead one is detected fast. */
import { spawn } from 'node:child_process';
import http from 'node:http';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { capLowersHeapLimit, DAEMON_ENV, DAEMON_NODE_FLAGS, OLD_SPACE_CAP } from '../../src/cli/daemon-heap.js';
import { CLI, Harness, project, ROOT, waitForExit, type CommandJson } from '../helpers/harness.js';

describe('daemon lifecycle', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await Harness.start();
  });
  afterAll(() => h.cleanup());

  it('exits 3 within 5 s when the daemon is down and autostart is off', async () => {
    const r = await h.cli(['threads', '--no-autostart']);
    expect(r.code).toBe(3);
    expect(r.stderr).toContain('combine daemon start');
    expect(r.ms).toBeLessThan(5000);
    const status = await h.cli(['daemon', 'status']);
    expect(status.code).toBe(3);
  });

  it('starts on demand, with a private home and a 0600 socket, and reports its status', async () => {
    await h.importProject(project('p', 2)); // autostarts
    expect(statSync(join(h.home, 'combine.sock')).mode & 0o777).toBe(0o600);
    expect(statSync(h.home).mode & 0o777).toBe(0o700);
    const status = await h.json(['daemon', 'status']);
    expect(Object.keys(status).sort()).toEqual(['db_path', 'http', 'pid', 'socket', 'uptime_s', 'version']);
    expect(status.http).toBeNull(); // HTTP is off unless asked for
    expect(existsSync(join(h.home, 'http.token'))).toBe(false);
    expect(status.pid).toBe(h.daemonPid());
    // Where the state is: the SQLite file in the home, or the Postgres URL with its password redacted.
    const url = h.database ? new URL(h.database.url) : null;
    expect(status.db_path).toBe(url ? h.database!.url.replace(url.password, 'redacted') : join(h.home, 'combine.db'));
  });

  it('runs from its own entry, without the CLI bundle, with the daemon heap settings (issue 20 target 3)', async () => {
    await h.cli(['daemon', 'start']);
    const pid = h.daemonPid();
    const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    const entry = argv.indexOf(join(ROOT, 'dist', 'daemon-run.js'));
    expect(entry).toBeGreaterThan(0);
    expect(DAEMON_NODE_FLAGS.length).toBeGreaterThan(0);
    for (const flag of DAEMON_NODE_FLAGS) expect(argv.indexOf(flag)).toBeGreaterThan(0);
    expect(argv.indexOf(DAEMON_NODE_FLAGS[0]!)).toBeLessThan(entry);
    // Nothing of the CLI is loaded: its bundle is never opened (it would stay resident for the daemon's life).
    expect(readFileSync(`/proc/${pid}/maps`, 'utf8')).not.toContain('cli.cjs');
    // glibc's malloc arenas capped (DAEMON_ENV): set by `combine daemon start`, since the CLI's own
    // environment (the harness's, built from scratch: nothing of the test runner's) has none of it.
    for (const k of Object.keys(DAEMON_ENV)) expect(h.env[k]).toBeUndefined();
    const environOf = (p: number | null) => readFileSync(`/proc/${p}/environ`, 'utf8').split('\0');
    for (const [k, v] of Object.entries(DAEMON_ENV)) expect(environOf(pid)).toContain(`${k}=${v}`);
    // A value the user set wins.
    expect((await h.cli(['daemon', 'stop'])).code).toBe(0);
    const own = Object.fromEntries(Object.keys(DAEMON_ENV).map((k) => [k, '3']));
    const restarted = await h.startDaemon(own);
    for (const k of Object.keys(DAEMON_ENV)) expect(environOf(restarted)).toContain(`${k}=3`);
  });

  it("caps the daemon's old space where that lowers V8's limit, and a heap size the user sets wins (issue 20 target 3)", async () => {
    expect((await h.cli(['daemon', 'stop'])).code).toBe(0);
    const environOf = (p: number) => readFileSync(`/proc/${p}/environ`, 'utf8').split('\0');
    const cmdlineOf = (p: number) => readFileSync(`/proc/${p}/cmdline`, 'utf8').split('\0');
    // The CLI decides as this test process would: both run on V8's defaults on this host.
    const capped = await h.startDaemon();
    expect(environOf(capped).filter((e) => e.startsWith('NODE_OPTIONS='))).toEqual((await capLowersHeapLimit()) ? [`NODE_OPTIONS=${OLD_SPACE_CAP}`] : []);
    expect(cmdlineOf(capped).some((a) => a.includes('old-space'))).toBe(false);
    expect((await h.cli(['daemon', 'stop'])).code).toBe(0);
    // The user's 6024 MiB (which main's argv kept and the first cap, in argv, overrode): kept as is.
    const own = await h.startDaemon({ NODE_OPTIONS: '--max-old-space-size=6024' });
    expect(environOf(own)).toContain('NODE_OPTIONS=--max-old-space-size=6024');
    expect(cmdlineOf(own).some((a) => a.includes('old-space'))).toBe(false);
  });

  it('never runs a second writer on the same home', async () => {
    const pid = h.daemonPid();
    const again = await h.json(['daemon', 'start']);
    expect(again).toMatchObject({ pid, started: false });
    // Even a foreground run that bypasses the socket check is refused by the home lock.
    const run = await h.cli(['daemon', 'run']);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('already running');
    expect(h.daemonPid()).toBe(pid);
  });

  it('keeps everything across stop and start', async () => {
    const r = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E1']);
    await h.waitForEnd(r.thread_id);
    const before = { threads: await h.json(['threads']), backlog: await h.json(['backlog', 'p']) };
    const stop = await h.cli(['daemon', 'stop', '--json']);
    expect(stop.code).toBe(0);
    expect((await h.cli(['daemon', 'status'])).code).toBe(3);
    await h.startDaemon();
    expect(await h.json(['threads'])).toEqual(before.threads);
    expect(await h.json(['backlog', 'p'])).toEqual(before.backlog);
    expect((await h.json(['ledger', 'verify'])).ok).toBe(true);
  });

  it('replaces the stale socket of a SIGKILLed daemon', async () => {
    const oldPid = h.daemonPid()!;
    await h.killDaemon();
    const r = await h.cli(['threads', '--json']); // autostart must get past the stale socket
    expect(r.code).toBe(0);
    expect(h.daemonPid()).not.toBe(oldPid);
  });

  it('two concurrent starts leave exactly one daemon', async () => {
    await h.stopDaemon();
    const runs = await Promise.all([h.cli(['daemon', 'start', '--json']), h.cli(['daemon', 'start', '--json'])]);
    for (const r of runs) expect(r.code, r.stderr).toBe(0);
    const pids = runs.map((r) => JSON.parse(r.stdout).pid);
    expect(pids[0]).toBe(pids[1]);
  });

  it('exits 3 naming the deadline when the daemon accepts the connection but never answers', async () => {
    const pid = await h.startDaemon();
    process.kill(pid, 'SIGSTOP'); // the socket still accepts (kernel backlog); nothing answers
    try {
      const r = await h.cli(['threads', '--json', '--no-autostart']);
      expect(r.code).toBe(3);
      expect(r.stderr).toContain('did not answer in time');
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    expect((await h.cli(['threads', '--json'])).code).toBe(0);
  });

  it('answers a refused command over its API with its own status (404, 400) and the reason, not a 500', async () => {
    await h.startDaemon();
    await h.importProject(project('api', 1));
    const post = (path: string, body: unknown) =>
      new Promise<{ status: number; body: any }>((resolve, reject) => {
        const text = JSON.stringify(body);
        const req = http.request(
          {
            socketPath: join(h.home, 'combine.sock'),
            method: 'POST',
            path,
            headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) },
          },
          (res) => {
            let data = '';
            res.on('data', (c) => (data += c));
            res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(data) }));
          },
        );
        req.on('error', reject);
        req.end(text);
      });

    const missing = await post('/generate.epic', { project_id: 'api', epic_id: 'E9' });
    expect(missing.status).toBe(404);
    expect(missing.body.error.data).toMatchObject({ code: 'NOT_FOUND', httpStatus: 404, combine: { kind: 'NOT_FOUND' } });
    expect(missing.body.error.message).toMatch(/no epic "E9"/);

    const badInput = await post('/generate.epic', { project_id: 'api' });
    expect(badInput.status).toBe(400);

    const ok = await post('/generate.epic', { project_id: 'api', epic_id: 'E1' });
    expect(ok.status).toBe(200);
  });

  it("speaks tRPC's wire format on its socket for every kind of request, the plain ones and the rest", async () => {
    await h.startDaemon();
    await h.importProject(project('wire', 1));
    const send = (method: 'GET' | 'POST', path: string, body?: string, type = 'application/json') =>
      new Promise<{ status: number; body: any }>((resolve, reject) => {
        const headers = body === undefined ? {} : { 'content-type': type, 'content-length': Buffer.byteLength(body) };
        const req = http.request({ socketPath: join(h.home, 'combine.sock'), method, path, headers }, (res) => {
          let data = '';
          res.on('data', (c) => (data += c));
          res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(data) }));
        });
        req.on('error', reject);
        req.end(body);
      });
    const q = (input: unknown) => `?input=${encodeURIComponent(JSON.stringify(input))}`;

    // The plain cases: one query, one mutation.
    const shown = await send('GET', `/project.show${q({ project_id: 'wire' })}`);
    expect(shown).toMatchObject({ status: 200, body: { result: { data: { project_id: 'wire' } } } });
    const made = await send('POST', '/generate.epic', JSON.stringify({ project_id: 'wire', epic_id: 'E1' }));
    expect(made.status).toBe(200);
    expect(made.body.result.data.thread_id).toMatch(/./);
    // A refusal keeps the daemon's own kind; bad input is 400 naming the field.
    const missing = await send('GET', `/thread${q({ thread_id: 'nope' })}`);
    expect(missing).toMatchObject({ status: 404, body: { error: { data: { code: 'NOT_FOUND', path: 'thread', combine: { kind: 'NOT_FOUND' } } } } });
    const invalid = await send('POST', '/cancel', JSON.stringify({ thread_id: '' }));
    expect(invalid).toMatchObject({ status: 400, body: { error: { data: { code: 'BAD_REQUEST', path: 'cancel' } } } });
    expect(invalid.body.error.message).toContain('thread_id');
    // Input that is not JSON, in a query and in a body: 400, and the daemon stays up.
    for (const r of [await send('GET', '/thread?input=notjson'), await send('POST', '/cancel', '{bad')]) {
      expect(r).toMatchObject({ status: 400, body: { error: { data: { code: 'BAD_REQUEST' } } } });
    }
    // The rest is answered as tRPC answers it: a batch, the wrong method, an unknown path, a body that is not JSON.
    const batch = await send('GET', `/health,project.show?batch=1&input=${encodeURIComponent(JSON.stringify({ 1: { project_id: 'wire' } }))}`);
    expect(batch.status).toBe(200);
    expect(batch.body).toMatchObject([{ result: { data: { live: true } } }, { result: { data: { project_id: 'wire' } } }]);
    expect(await send('GET', `/cancel${q({ thread_id: 'x' })}`)).toMatchObject({ status: 405, body: { error: { data: { code: 'METHOD_NOT_SUPPORTED' } } } });
    expect(await send('POST', '/thread', JSON.stringify({ thread_id: 'x' }))).toMatchObject({ status: 405 });
    expect(await send('GET', '/nosuch')).toMatchObject({ status: 404, body: { error: { data: { code: 'NOT_FOUND', path: 'nosuch' } } } });
    expect(await send('POST', '/cancel', 'x', 'text/plain')).toMatchObject({ status: 415, body: { error: { data: { code: 'UNSUPPORTED_MEDIA_TYPE' } } } });
    expect((await h.cli(['daemon', 'status', '--json'])).code).toBe(0);
  });
});

describe('daemon run (foreground)', () => {
  it('serves commands and exits 0 on SIGTERM', async () => {
    const h = await Harness.start();
    try {
      const child = spawn(process.execPath, [CLI, 'daemon', 'run'], { env: h.env, stdio: 'ignore' });
      let ready = false;
      for (let i = 0; i < 200 && !ready; i++) {
        ready = (await h.cli(['daemon', 'status', '--json'])).code === 0;
        if (!ready) await new Promise((r) => setTimeout(r, 50));
      }
      expect(ready).toBe(true);
      const exit = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
      child.kill('SIGTERM');
      expect(await exit).toBe(0);
      await waitForExit(child.pid!);
    } finally {
      await h.cleanup();
    }
  });

  it('refuses a config file with a bad field, naming it (exit 2)', async () => {
    const h = await Harness.start();
    try {
      h.writeConfig({ retry: { max_attempts: 'three' } });
      const r = await h.cli(['daemon', 'start']);
      expect(r.code).toBe(2);
      expect(r.stderr).toContain('retry.max_attempts');
    } finally {
      await h.cleanup();
    }
  });
});
