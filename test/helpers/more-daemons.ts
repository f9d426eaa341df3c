/**
 * More daemons on the harness's database (several daemons on one Postgres, issue 18): each with a
 * COMBINE_HOME of its own — socket, pid, log, config — and the harness's environment otherwise (the
 * same COMBINE_DATABASE_URL, simulator and key). The harness's own home is the first daemon.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Harness, waitForExit } from './harness.js';

export interface OtherDaemon {
  home: string;
  /** Pass to `h.cli`/`h.json` to talk to this daemon. */
  opts: { env: NodeJS.ProcessEnv };
}

export class MoreDaemons {
  private readonly daemons: OtherDaemon[] = [];

  constructor(private readonly h: Harness) {}

  /** Starts a daemon on a new home with `config` (config.json) on the harness's database. */
  async start(config: unknown): Promise<OtherDaemon> {
    if (!this.h.database) throw new Error('pg-* test files run in the postgres project only (vitest.config.ts)');
    const home = mkdtempSync(join(tmpdir(), 'cmb-more-'));
    const d = { home, opts: { env: { COMBINE_HOME: home } } };
    this.daemons.push(d);
    writeFileSync(join(home, 'config.json'), JSON.stringify(config));
    await this.h.startDaemon(d.opts.env);
    return d;
  }

  /** SIGKILLs every daemon started here and removes their homes (before `h.cleanup()` drops the database). */
  async cleanup(): Promise<void> {
    for (const d of this.daemons.splice(0)) {
      let pid = 0;
      try {
        pid = Number(readFileSync(join(d.home, 'daemon.pid'), 'utf8').trim());
      } catch {}
      if (pid) {
        try {
          process.kill(pid, 'SIGKILL');
          await waitForExit(pid);
        } catch {}
      }
      rmSync(d.home, { recursive: true, force: true });
    }
  }
}
