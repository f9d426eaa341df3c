/** Opening the database: one place for the pragmas every connection needs. */
import Database from 'better-sqlite3';

export type Db = Database.Database;

export interface OpenOptions {
  readonly?: boolean;
  /** How long a statement waits for another process's write lock before SQLITE_BUSY. */
  busyTimeoutMs?: number;
}

/**
 * Opens (creating if needed) the database with WAL and synchronous=FULL: a committed transaction is on
 * disk before the commit returns. PRAGMAs do not work inside migrations, so they are set here.
 */
export function openDatabase(path: string, opts: OpenOptions = {}): Db {
  const db = new Database(path, { readonly: opts.readonly ?? false });
  // auto_vacuum can be chosen only before the first table exists; older databases are converted by
  // idle maintenance (daemon/maintenance.ts). Checked first so an existing file is not touched.
  if (!opts.readonly && isEmptyDatabase(db)) db.pragma('auto_vacuum = INCREMENTAL');
  if (!opts.readonly) db.pragma('journal_mode = WAL');
  // The writer runs each closure in a SAVEPOINT (db/writer.ts). A savepoint keeps the pages it changes
  // in a sub-journal, held in memory only up to 64 KiB by default and then spilled to a temporary file
  // for the rest of the transaction: ~190 KB of write calls per engine item, 2/3 of all the bytes it
  // wrote (bench target 1). In memory it is bounded by one closure's changed pages (prunes and imports
  // run in batches) and dropped at each RELEASE. It is never needed after a crash: in WAL mode an
  // unfinished transaction is simply not in the log.
  if (!opts.readonly) db.pragma('temp_store = MEMORY');
  // The automatic checkpoint runs inside the COMMIT that takes the WAL past this many frames, on the
  // writer's thread: it copies every page changed since the last one into the database file and syncs
  // it. A page changed again and again (a work-item index leaf, a project's spend row) is copied once
  // per checkpoint, so checkpoints 4× further apart copy ~half the pages per item (target 1's run:
  // 5.9 → ~2.8 pages, 67 → ~55 KB written per item) and sync the database file 4× less often. The WAL
  // grows to ~16 MiB instead of ~4 MiB between checkpoints; idle maintenance truncates it.
  if (!opts.readonly) db.pragma('wal_autocheckpoint = 4000');
  db.pragma('synchronous = FULL');
  db.pragma(`busy_timeout = ${opts.busyTimeoutMs ?? 5000}`);
  db.pragma('foreign_keys = ON');
  return db;
}

function isEmptyDatabase(db: Db): boolean {
  return (db.prepare('SELECT count(*) AS n FROM sqlite_master').get() as { n: number }).n === 0;
}
