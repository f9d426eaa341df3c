/**
 * The peer baseline: plainjob (a SQLite job queue for better-sqlite3) processing no-op jobs, as shipped
 * (its own pragmas: WAL, synchronous=NORMAL, one autocommit per state change). Jobs are enqueued in one
 * transaction first; the figure is jobs done per second from worker start to the last completion.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { better, defineQueue, defineWorker } from 'plainjob';

const silent = { error() {}, warn() {}, info() {}, debug() {} };

export async function runPlainjobOnce(jobs: number): Promise<{ jobs: number; seconds: number; perSecond: number }> {
  const dir = mkdtempSync(join(tmpdir(), 'cmb-bench-plainjob-'));
  try {
    const db = new Database(join(dir, 'plainjob.db'));
    const queue = defineQueue({ connection: better(db), logger: silent });
    db.transaction(() => {
      for (let i = 0; i < jobs; i++) queue.add('noop', { i });
    })();
    let done = 0;
    let finish!: () => void;
    const finished = new Promise<void>((r) => (finish = r));
    const worker = defineWorker('noop', async () => {}, {
      queue,
      logger: silent,
      onCompleted: () => {
        if (++done === jobs) finish();
      },
    });
    const started = performance.now();
    void worker.start();
    await finished;
    const seconds = (performance.now() - started) / 1000;
    await worker.stop();
    queue.close();
    return { jobs, seconds, perSecond: jobs / seconds };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
