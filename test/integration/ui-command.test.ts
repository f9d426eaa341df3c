/**
 * Turning HTTP on: `combine ui` in a running daemon that does not serve it, config `http.port` at
 * start, and the errors a user can make (a bad port, a port already taken). The real CLI and daemon.
 */
import net from 'node:net';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Harness, project } from '../helpers/harness.js';
import { httpRequest } from '../helpers/http.js';

let h: Harness | null = null;

afterEach(async () => {
  await h?.cleanup();
  h = null;
});

function token(home: string): string {
  return readFileSync(join(home, 'http.token'), 'utf8').trim();
}

describe('combine ui', () => {
  it('turns HTTP on in a running daemon, prints the URL with the token, and keeps the port it got', async () => {
    h = await Harness.start();
    await h.importProject(project('p', 1)); // autostarts the daemon, without HTTP
    expect((await h.json(['daemon', 'status'])).http).toBeNull();
    const ui = await h.json<{ url: string; port: number; opened: boolean }>(['ui', '--port', '0']);
    expect(ui.url).toBe(`http://127.0.0.1:${ui.port}/?token=${encodeURIComponent(token(h.home))}`);
    expect(ui.opened).toBe(false);
    expect((await h.json(['daemon', 'status'])).http).toEqual({ port: ui.port, url: `http://127.0.0.1:${ui.port}/` });
    const projects = await httpRequest(ui.port, 'GET', '/projects', { host: `127.0.0.1:${ui.port}`, authorization: `Bearer ${token(h.home)}` });
    expect(projects.status).toBe(200);
    expect(projects.json.map((p: { project_id: string }) => p.project_id)).toEqual(['p']);
    // Asked again (even for another port), it answers where HTTP already is.
    const again = await h.cli(['ui', '--port', '1']);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain(`http://127.0.0.1:${ui.port}/?token=`);
    expect(again.stdout).toContain(`already serves HTTP on port ${ui.port}`);
  });

  it('serves from the start with config http.port, and refuses a bad or taken port', async () => {
    h = await Harness.start();
    const bad = await h.cli(['ui', '--port', 'eighty']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--port: "eighty" is not a port');
    expect((await h.cli(['daemon', 'start', '--http-port', '70000'])).code).toBe(2);

    const taken = net.createServer();
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', r));
    const busy = (taken.address() as net.AddressInfo).port;
    try {
      const r = await h.cli(['ui', '--port', String(busy)]);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(`cannot serve HTTP on 127.0.0.1:${busy}`);
      expect(r.stderr).toContain('EADDRINUSE');
      h.writeConfig({ http: { port: busy } });
      await h.stopDaemon();
      const start = await h.cli(['daemon', 'start']);
      expect(start.code).toBe(1);
      expect(start.stderr).toContain(`cannot serve HTTP on 127.0.0.1:${busy}`);
    } finally {
      taken.close();
    }
    h.writeConfig({ http: { port: 0 } });
    const status = await h.json<{ http: { port: number } }>(['daemon', 'start']);
    expect(status.http.port).toBeGreaterThan(0);
    const health = await httpRequest(status.http.port, 'GET', '/health', { host: `localhost:${status.http.port}`, authorization: `Bearer ${token(h.home)}` });
    expect(health.status).toBe(200);
    expect(health.json.ready).toBe(true);
  });
});
