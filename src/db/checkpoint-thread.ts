/**
 * The one worker thread per process that runs WAL checkpoints (db/checkpoint-worker.ts) for every
 * `WalCheckpointer`: started on first use and kept while the process lives (it holds the process up only
 * while a request is in flight), so a process that opens the database again (tests, benchmarks) starts
 * it once. Requests of one connection are answered in order.
 */
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';

/** What the worker opens for one writer. */
export interface CheckpointTarget {
  dbPath: string;
  busyTimeoutMs: number;
}

/** `conn`: the worker's connection for one writer. */
type Request = { conn: number } & ({ kind: 'open'; target: CheckpointTarget } | { kind: 'checkpoint' | 'close' });

/** A request as posted: `seq` is echoed in its answer. */
export type CheckpointRequest = Request & { seq: number };

/** The WAL's frames, and how many of them are in the database file (zeros for open and close). */
export type CheckpointAnswer = { seq: number } & ({ ok: true; log: number; checkpointed: number } | { ok: false; message: string });

/** Told when the worker is gone (an error, out of memory): its connections are closed with it. */
export interface CheckpointThreadUser {
  workerStopped(): void;
}

/**
 * The worker's script: the bundle's `checkpoint-worker.js` next to the daemon's, or the TypeScript
 * source, loaded through tsx's loader registered inside the worker (`--import` is not a worker option).
 */
function startWorker(): Worker {
  if (!import.meta.url.endsWith('.ts')) return new Worker(new URL('./checkpoint-worker.js', import.meta.url));
  const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx/esm/api')).href;
  const script = new URL('./checkpoint-worker.ts', import.meta.url).href;
  return new Worker(`import(${JSON.stringify(tsx)}).then((api) => { api.register(); return import(${JSON.stringify(script)}); })`, { eval: true });
}

class CheckpointThread {
  private readonly worker: Worker;
  private nextConn = 1;
  private nextSeq = 1;
  private readonly pending = new Map<number, (a: CheckpointAnswer) => void>();
  private readonly users = new Map<number, CheckpointThreadUser>();

  constructor(private readonly onGone: () => void) {
    const worker = (this.worker = startWorker());
    worker.on('message', (a: CheckpointAnswer) => {
      const resolve = this.pending.get(a.seq);
      this.pending.delete(a.seq);
      if (this.pending.size === 0) worker.unref();
      resolve?.(a);
    });
    worker.on('error', () => this.gone());
    worker.on('exit', () => this.gone());
    worker.unref();
  }

  /** Opens a connection in the worker for `user`: its number for `request`, and the worker's answer. */
  open(target: CheckpointTarget, user: CheckpointThreadUser): { conn: number; opened: Promise<CheckpointAnswer> } {
    const conn = this.nextConn++;
    this.users.set(conn, user);
    return { conn, opened: this.request({ kind: 'open', conn, target }) };
  }

  request(r: Request): Promise<CheckpointAnswer> {
    if (r.kind === 'close') this.users.delete(r.conn);
    const seq = this.nextSeq++;
    return new Promise((resolve) => {
      this.pending.set(seq, resolve);
      this.worker.ref(); // a request in flight keeps the process up
      this.worker.postMessage({ ...r, seq });
    });
  }

  private gone(): void {
    this.onGone();
    for (const [seq, resolve] of this.pending) resolve({ seq, ok: false, message: 'the checkpoint worker stopped' });
    this.pending.clear();
    for (const user of this.users.values()) user.workerStopped();
    this.users.clear();
  }
}

let shared: CheckpointThread | null = null;

/** The process's checkpoint thread, started if it is not running. */
export function checkpointThread(): CheckpointThread {
  shared ??= new CheckpointThread(() => {
    shared = null;
  });
  return shared;
}
