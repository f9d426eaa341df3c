/**
 * The ledger service: a thread's entries, `ledger verify`, and moving finished threads' records between
 * homes (`ledger export|import`). The ledger itself is src/ledger/.
 */
import type { Clock } from '../../core/clock.js';
import { CommandError } from '../../core/errors.js';
import type { Sql } from '../../core/sql.js';
import { importLedger } from '../../ledger/transfer.js';
import type { ControlPlaneReader } from '../control-plane/reader.js';
import type { Write } from '../engine/tx.js';
import type { PressureMonitor } from '../pressure/monitor.js';
import { MAX_LEDGER_VIEW_ENTRIES, threadLedgerView } from '../views.js';
import { resolveThreadId } from './id-resolver.js';

export class LedgerService {
  constructor(
    private readonly reader: Sql,
    private readonly write: Write,
    private readonly clock: Clock,
    /** `verify` and `export` read the whole history: in the control plane's worker thread, off the event loop. */
    private readonly controlPlane: Pick<ControlPlaneReader, 'run'>,
    private readonly pressure: Pick<PressureMonitor, 'assertAcceptingCommands'>,
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

  verify() {
    return this.controlPlane.run('verifyLedger', undefined);
  }

  async export(scope: { threadId: string | null; projectId: string | null }) {
    const threadId = scope.threadId === null ? null : await resolveThreadId(this.reader, scope.threadId);
    return await this.controlPlane.run('exportLedger', { scope: { ...scope, threadId }, now: this.clock.now() });
  }

  /** Verifies the whole file first; imports all of it in one transaction, or nothing. */
  import(text: string) {
    this.pressure.assertAcceptingCommands();
    return this.write((tx) => importLedger(tx, text));
  }
}
