import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openDatabase, type Db } from '../../src/db/connection.js';
import { WalCheckpointer } from '../../src/db/wal-checkpointer.js';
import { Writer } from '../../src/db/writer.js';

/** A frame is a 24-byte header and one 4 KiB page; the WAL file starts with a 32-byte header. */
const FRAME = 24 + 4096;
const RESTART_FRAMES = 64;

describe('WAL checkpoints off the writer thread', () => {
  let dir: string;
  let path: string;
  let db: Db;
  let writer: Writer;
  let checkpoints: WalCheckpointer;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'cmb-ckpt-'));
    path = join(dir, 'w.db');
    db = openDatabase(path);
    db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)');
    checkpoints = new WalCheckpointer({
      db,
      target: { dbPath: path, busyTimeoutMs: 1000 },
      betweenTransactions: (fn) => writer.outsideTransaction(fn),
      framesPerCheckpoint: 16,
      restartFrames: RESTART_FRAMES,
    });
    writer = new Writer(db, { onCommit: () => checkpoints.committed() });
  });
  afterEach(async () => {
    await writer.close();
    await checkpoints.close();
    db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /**
   * One commit of two ~1 KB rows, on pages spread over the table (a few frames), then a turn of the event
   * loop, as between the engine's writes: a write queued by the one before would join its flush at once.
   */
  const commit = async (round: number) => {
    await writer.write((sql) => {
      for (let i = 0; i < 2; i++) sql.run('INSERT OR REPLACE INTO t (id, v) VALUES (?, ?)', [((round * 7919 + i * 104729) % 5000) + 1, 'x'.repeat(1000)]);
    });
    await new Promise((r) => setImmediate(r));
  };
  const size = (file: string) => statSync(file).size;

  /** Waits (polling, no deadline of its own) until the worker has copied a first page into the database file. */
  const workerCheckpointed = async () => {
    const before = size(path);
    await commit(0);
    while (size(path) === before) await new Promise((r) => setTimeout(r, 10));
  };

  /**
   * Commits one after another, as a busy writer does, until the WAL file has not grown for 50 commits
   * (the log started over and is rewritten in place) or `max` commits; returns the commits made.
   */
  const commitUntilWalStopsGrowing = async (max: number) => {
    let last = size(`${path}-wal`);
    let still = 0;
    for (let round = 1; round <= max; round++) {
      await commit(round);
      const now = size(`${path}-wal`);
      still = now === last ? still + 1 : 0;
      last = now;
      if (still === 50) return round;
    }
    return max;
  };

  it("turns the writer's automatic checkpoint off, and keeps the WAL bounded by starting it over under steady writes", async () => {
    expect(db.pragma('wal_autocheckpoint', { simple: true })).toBe(0);
    await workerCheckpointed();
    // Without a restart every commit would append its frames, and the file would grow to the end.
    expect(await commitUntilWalStopsGrowing(3000)).toBeLessThan(3000);
    expect(size(`${path}-wal`)).toBeLessThan(32 + FRAME * 4 * RESTART_FRAMES);
  });

  it('lets the log grow while a reader holds an old snapshot, and starts it over once the reader lets go', async () => {
    await workerCheckpointed();
    const reader = openDatabase(path, { readonly: true });
    reader.exec('BEGIN');
    reader.prepare('SELECT count(*) FROM t').get(); // the snapshot: frames after it cannot be copied
    try {
      for (let round = 1; round <= 200; round++) await commit(round);
      // The writes were not held up, and the log could not start over.
      expect(size(`${path}-wal`)).toBeGreaterThan(32 + FRAME * 4 * RESTART_FRAMES);
    } finally {
      reader.exec('COMMIT');
      reader.close();
    }
    const grown = size(`${path}-wal`);
    expect(await commitUntilWalStopsGrowing(3000)).toBeLessThan(3000);
    expect(size(`${path}-wal`)).toBeLessThan(grown + FRAME * 4 * RESTART_FRAMES);
  });
});
