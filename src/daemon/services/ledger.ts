/**
 * The ledger service: a thread's entries, `ledger verify`, and moving finished threads' records between
 * homes (`ledger export|import`). The ledger itself is src/ledger/.
 */
import type { Clock } from '../../core/clock.js';
import { CommandError } from '../../core/errors.js';
import type { Sql } from '../../core/sql.js';
import { exportLedger, importLedger } from '../../ledger/transfer.js';
import { verifyLedger } from '../../ledger/verify.js';
import type { Write } from '../engine/tx.js';
import { MAX_LEDGER_VIEW_ENTRIES, threadLedgerView } from '../views.js';
import { resolveThreadId } from './id-resolver.js';

export class LedgerService {
  constructor(
    private readonly reader: Sql,
    private readonly write: Write,
    private readonly clock: Clock,
  ) {}

  /** A thread's entries (and its children's), oldest first; `typedId` as the user typed it (id-resolver.ts). */
  async thread(typedId: string) {
    const threadId = await resolveThreadId(this.reader, typedId);
    const view = await threadLedgerView(this.reader, threadId);
    if (view) return view;
    throw new CommandError(
      'BAD_REQUEST',
      `thread ${threadId} and its children have more than ${MAX_LEDGER_VIEW_ENTRIES} ledger entries: read one child at a time (combine thread ${threadId} lists them), or write them all with \`combine ledger export ${threadId}\``,
      'TOO_MANY_ENTRIES',
    );
  }

  async verify() {
    return await verifyLedger(this.reader);
  }

  async export(scope: { threadId: string | null; projectId: string | null }) {
    const threadId = scope.threadId === null ? null : await resolveThreadId(this.reader, scope.threadId);
    return await exportLedger(this.reader, { ...scope, threadId }, this.clock.now());
  }

  /** Verifies the whole file first; imports all of it in one transaction, or nothing. */
  import(text: string) {
    return this.write((tx) => importLedger(tx, text));
  }
}
