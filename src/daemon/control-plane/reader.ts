/**
 * Control-plane isolation (ADR-002 §5-3): `ledger verify`, `ledger export` and a prune's dry run read
 * the whole history, which takes seconds on a large home. They run in a worker thread with its own
 * read-only connection, so the event loop that acknowledges commands, runs the engine and answers
 * `health` never waits for them. The worker starts on first use and is reused; jobs queue behind
 * each other in it.
 */
import { Worker } from 'node:worker_threads';
import { CommandError } from '../../core/errors.js';
import type { ReadJobArgs, ReadJobName, ReadJobResult, ReadTarget } from './read-jobs.js';

interface Pending {
  resolve(value: unknown): void;
  reject(err: unknown): void;
}

/** The worker's script: the bundle's `read-worker.js` next to the daemon's, or the TypeScript source under tsx. */
function workerScript(): { url: URL; execArgv: string[] } {
  const fromSource = import.meta.url.endsWith('.ts');
  return fromSource
    ? { url: new URL('./read-worker.ts', import.meta.url), execArgv: ['--import', 'tsx'] }
    : { url: new URL('./read-worker.js', import.meta.url), execArgv: [] };
}

export class ControlPlaneReader {
  private worker: Worker | null = null;
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();

  constructor(private readonly target: ReadTarget) {}

  run<J extends ReadJobName>(job: J, args: ReadJobArgs<J>): Promise<ReadJobResult<J>> {
    const worker = this.start();
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      worker.postMessage({ id, job, args });
      worker.ref(); // busy: keep the process up until the answer comes
    });
  }

  private start(): Worker {
    if (this.worker) return this.worker;
    const { url, execArgv } = workerScript();
    const worker = new Worker(url, { workerData: this.target, execArgv });
    worker.on(
      'message',
      (m: {
        id: number;
        ok: boolean;
        result?: unknown;
        error?: { name: string; message: string; command: { kind: CommandError['kind']; code: string | null } | null };
      }) => {
        const p = this.pending.get(m.id);
        if (!p) return;
        this.pending.delete(m.id);
        if (this.pending.size === 0) worker.unref();
        if (m.ok) return p.resolve(m.result);
        const e = m.error!;
        p.reject(e.command ? new CommandError(e.command.kind, e.message, e.command.code ?? undefined) : Object.assign(new Error(e.message), { name: e.name }));
      },
    );
    // A worker that dies (out of memory, a bug) fails its jobs; the next job starts a new one.
    const fail = (err: Error) => {
      for (const p of this.pending.values()) p.reject(err);
      this.pending.clear();
      this.worker = null;
    };
    worker.on('error', fail);
    worker.on('exit', (code) => fail(new Error(`the control-plane reader exited (${code})`)));
    worker.unref();
    this.worker = worker;
    return worker;
  }

  async close(): Promise<void> {
    const w = this.worker;
    this.worker = null;
    if (w) await w.terminate();
  }
}
