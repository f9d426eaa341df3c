/**
 * The WAL checkpoints' worker thread (db/checkpoint-thread.ts starts it, one per process): a connection
 * of its own to each writer's database, running `PRAGMA wal_checkpoint(PASSIVE)` when asked and
 * answering with the WAL's frame counts. It writes no row: a checkpoint copies committed pages from the
 * WAL into the database file and syncs it, which SQLite makes crash-safe on its own.
 */
import { parentPort } from 'node:worker_threads';
import { type Db, openDatabase } from './connection.js';
import type { CheckpointAnswer, CheckpointRequest } from './checkpoint-thread.js';

const connections = new Map<number, Db>();

function answer(r: CheckpointRequest): CheckpointAnswer {
  if (r.kind === 'open') {
    connections.set(r.conn, openDatabase(r.target.dbPath, { busyTimeoutMs: r.target.busyTimeoutMs }));
    return { seq: r.seq, ok: true, log: 0, checkpointed: 0 };
  }
  const db = connections.get(r.conn);
  if (!db) return { seq: r.seq, ok: false, message: `no connection ${r.conn}` };
  if (r.kind === 'close') {
    connections.delete(r.conn);
    db.close();
    return { seq: r.seq, ok: true, log: 0, checkpointed: 0 };
  }
  // PASSIVE never waits: it copies what no reader still needs and leaves the rest for the next one.
  const [c] = db.pragma('wal_checkpoint(PASSIVE)') as { log: number; checkpointed: number }[];
  return { seq: r.seq, ok: true, log: c!.log, checkpointed: c!.checkpointed };
}

parentPort!.on('message', (r: CheckpointRequest) => {
  let a: CheckpointAnswer;
  try {
    a = answer(r);
  } catch (err) {
    a = { seq: r.seq, ok: false, message: (err as Error).message };
  }
  parentPort!.postMessage(a);
});
