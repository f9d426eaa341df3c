/** `combine prune --older-than <duration>`: retention for closed threads. */
import { Command } from 'commander';
import { parseDurationMs } from '../../domain/duration.js';
import { withCommonOptions, type CommonOptions } from '../common.js';
import { withDaemon } from '../daemon-control.js';
import { EXIT, print } from '../output.js';
import { CliError } from '../../core/errors.js';

/** A prune of a large history takes a while; it commits batch by batch, so it is safe to wait long. */
const PRUNE_TIMEOUT_MS = 30 * 60_000;

export function pruneCommand(getHome: () => string): Command {
  return withCommonOptions(
    new Command('prune')
      .description('remove closed threads (with their work items, mutations and ledger entries) closed longer ago than a duration')
      .requiredOption('--older-than <duration>', 'closed before now minus this, e.g. 30d, 12h, 90m')
      .option('--dry-run', 'count what would be removed; remove nothing')
      .addHelpText(
        'after',
        [
          '',
          'Active threads are never touched, nor is the newest completed thread of each request (it keeps a',
          'repeated request a no-op and explains the document). A generate-all goes with all its children.',
          'Ledger entries are removed only under checkpoints that keep `combine ledger verify` passing.',
          '',
          'Examples:',
          '  combine prune --older-than 30d --dry-run',
          '  combine prune --older-than 30d --json',
        ].join('\n'),
      ),
  ).action(async (opts: CommonOptions & { olderThan: string; dryRun?: boolean }) => {
    const ms = parseDurationMs(opts.olderThan);
    if (ms === null) throw new CliError(`--older-than: "${opts.olderThan}" is not a duration (use e.g. 30d, 12h, 90m)`, EXIT.USAGE);
    const r = await withDaemon(getHome(), opts, ({ client }) =>
      client.prune.mutate({ older_than_ms: ms, dry_run: opts.dryRun ?? false }, { signal: AbortSignal.timeout(PRUNE_TIMEOUT_MS) }),
    );
    await print(opts, r, () =>
      [
        `${r.dry_run ? 'would remove' : 'removed'} ${r.threads} closed thread(s) closed before ${r.cutoff}:`,
        `  ${r.work_items} work item(s), ${r.ledger_entries} ledger entries under ${r.checkpoints} checkpoint(s)`,
        ...(r.dry_run ? [] : [`  ${r.freed_pages} page(s) returned to the file system`]),
      ].join('\n'),
    );
  });
}
