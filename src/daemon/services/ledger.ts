/**
 * The ledger service: a thread's entries, `ledger verify`, and moving finished threads' records between
 * homes (`ledger export|import`). The ledger itself is src/ledger/.
 */
import type { Clock } from '../../core/clock.js';
import { CommandError } from '../../core/errors.js';
import type { Db } from '../../db/connection.js';
import { getThread } from '../../db/threads.js';
import { exportLedger, importLedger } from '../../ledger/transfer.js';
import { verifyLedger } from '../../ledger/verify.js';
import type { Write } from '../engine/tx.js';
import { threadLedgerView } from '../views.js';

export class LedgerService {
  constructor(
    private readonly db: Db,
    private readonly write: Write,
    private readonly clock: Clock,
  ) {}

  /** A thread's entries, oldest first. */
  thread(threadId: string) {
    if (!getThread(this.db, threadId)) throw new CommandError('NOT_FOUND', `no thread "${threadId}"`);
    return threadLedgerView(this.db, threadId);
  }

  verify() {
    return verifyLedger(this.db);
  }

  export(scope: { threadId: string | null; projectId: string | null }) {
    return exportLedger(this.db, scope, this.clock.now());
  }

  /** Verifies the whole file first; imports all of it in one transaction, or nothing. */
  import(text: string) {
    return this.write((tx) => importLedger(tx, text));
  }
}
