/**
 * WAL checkpoints off the writer's thread. SQLite's automatic checkpoint runs inside the COMMIT that
 * takes the WAL past 1,000 frames: it reads those pages back, writes them into the database file and
 * syncs it, on the thread that runs every write and the engine (5 % of its CPU in target 1's run, and
 * 7–10 ms of blocked COMMIT each time). Here the writer's connection has `wal_autocheckpoint=0`, and a
 * worker thread with its own connection (db/checkpoint-worker.ts) runs `wal_checkpoint(PASSIVE)` after
 * commits, on the second core; the writer's thread only posts a message.
 *
 * A PASSIVE checkpoint never blocks the writer, but the WAL starts over from its first frame only when
 * a write transaction begins with every frame already copied, and a busy writer keeps appending behind
 * the checkpoint. So once the WAL passes `restartFrames`, writes pause between two transactions for one
 * more checkpoint of the few frames left (the writer's thread stays free meanwhile); the next commit
 * then writes from the start of the log. A reader holding an old snapshot can keep that last checkpoint
 * from finishing, as it kept the automatic one: the log then grows until the reader lets go, and the
 * pause is retried only after another `restartFrames` frames.
 *
 * Durability is unchanged: commits are synced to the WAL by the writer as before (synchronous=FULL), and
 * a checkpoint interrupted by a crash is redone from the WAL at the next open. If the worker fails, the
 * writer's connection goes back to SQLite's automatic checkpoint.
 */
import { type CheckpointAnswer, type CheckpointTarget, checkpointThread, type CheckpointThreadUser } from './checkpoint-thread.js';
import type { Db } from './connection.js';

export interface WalCheckpointerOptions {
  /** The writer's connection: its automatic checkpoint is turned off while the worker runs. */
  db: Db;
  target: CheckpointTarget;
  /** Runs `fn` with no write transaction open, and none begun until it settles (Writer.outsideTransaction). */
  betweenTransactions: (fn: () => Promise<void>) => Promise<void>;
  /** Frames a checkpoint aims to copy: fewer checkpoints (database syncs) for more frames each. */
  framesPerCheckpoint?: number;
  /** The WAL's length, in frames, at which writes pause so that the log can start over. */
  restartFrames?: number;
}

/** SQLite's default `wal_autocheckpoint`, restored if the worker fails. */
const SQLITE_AUTOCHECKPOINT = 1000;
/** Commits between two checkpoints at most, however few frames each commit writes. */
const MAX_COMMITS_BETWEEN = 256;
/** Checkpoints failed in a row after which the writer's connection checkpoints for itself again. */
const MAX_FAILURES = 3;

export class WalCheckpointer implements CheckpointThreadUser {
  /** The worker's connection to this database; null once the worker is gone or this is closed. */
  private conn: number | null;
  /** The checkpoint in flight (at most one). */
  private inFlight: Promise<CheckpointAnswer> | null = null;
  private commitsSinceRequest = 0;
  /** Commits between checkpoint requests, adapted so that each copies about `framesPerCheckpoint`. */
  private every = 1;
  private last = { log: 0, checkpointed: 0 };
  private restartAt: number;
  private pausing = false;
  /** Checkpoints failed in a row. */
  private failures = 0;
  private readonly framesPerCheckpoint: number;
  private readonly restartFrames: number;

  constructor(private readonly o: WalCheckpointerOptions) {
    this.framesPerCheckpoint = o.framesPerCheckpoint ?? 512;
    this.restartFrames = o.restartFrames ?? 4096;
    this.restartAt = this.restartFrames;
    const { conn, opened } = checkpointThread().open(o.target, this);
    this.conn = conn;
    o.db.pragma('wal_autocheckpoint = 0');
    void opened.then((a) => a.ok || this.giveUp());
  }

  /** Called after each commit of the writer: asks for a checkpoint when enough commits have gone by. */
  committed(): void {
    if (++this.commitsSinceRequest < this.every || this.inFlight !== null || this.conn === null) return;
    this.commitsSinceRequest = 0;
    void this.checkpoint().then((a) => this.adapt(a));
  }

  /** Closes the worker's connection (after the writer has closed); the writer's connection is left as it was. */
  async close(): Promise<void> {
    while (this.inFlight !== null) await this.inFlight;
    const conn = this.conn;
    this.conn = null;
    if (conn !== null) await checkpointThread().request({ kind: 'close', conn });
  }

  /** The worker is gone: SQLite's automatic checkpoint keeps the WAL bounded again. */
  workerStopped(): void {
    this.conn = null;
    if (this.o.db.open) this.o.db.pragma(`wal_autocheckpoint = ${SQLITE_AUTOCHECKPOINT}`);
  }

  /** The worker's connection cannot checkpoint this database: back to the automatic checkpoint. */
  private giveUp(): void {
    const conn = this.conn;
    this.workerStopped();
    if (conn !== null) void checkpointThread().request({ kind: 'close', conn });
  }

  /** One checkpoint, after the one in flight if any. */
  private async checkpoint(): Promise<CheckpointAnswer> {
    while (this.inFlight !== null) await this.inFlight;
    if (this.conn === null) return { seq: 0, ok: false, message: 'no checkpoint connection' };
    const asked = checkpointThread().request({ kind: 'checkpoint', conn: this.conn });
    this.inFlight = asked;
    try {
      return await asked;
    } finally {
      this.inFlight = null;
    }
  }

  /** Spaces the requests by frames copied, and pauses writes for a restart when the log is long. */
  private adapt(a: CheckpointAnswer): void {
    if (!a.ok) {
      // One can be busy (the idle maintenance's own checkpoint at the same moment); more in a row cannot.
      if (++this.failures >= MAX_FAILURES) this.giveUp();
      return;
    }
    this.failures = 0;
    const restarted = a.log < this.last.log;
    const copied = restarted ? a.checkpointed : a.checkpointed - this.last.checkpointed;
    this.last = { log: a.log, checkpointed: a.checkpointed };
    if (restarted) this.restartAt = this.restartFrames;
    if (copied < this.framesPerCheckpoint / 2) this.every = Math.min(this.every * 2, MAX_COMMITS_BETWEEN);
    else if (copied > this.framesPerCheckpoint * 2) this.every = Math.max(1, this.every >> 1);
    if (a.log >= this.restartAt && !this.pausing) this.pauseForRestart();
  }

  private pauseForRestart(): void {
    this.pausing = true;
    void this.o
      .betweenTransactions(async () => {
        const a = await this.checkpoint();
        if (!a.ok) return;
        this.last = { log: a.log, checkpointed: a.checkpointed };
        // Not all copied: a reader still needs old frames. Try again once the log has grown as much again.
        if (a.checkpointed < a.log) this.restartAt = a.log + this.restartFrames;
      })
      .catch(() => undefined) // the writer was closed meanwhile: nothing to restart
      .finally(() => {
        this.pausing = false;
      });
  }
}
