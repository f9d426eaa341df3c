/** `combine ledger <thread-id>` and `combine ledger verify`. */
import { Command } from 'commander';
import { withCommonOptions, type CommonOptions } from '../common.js';
import { withDaemon } from '../daemon-control.js';
import { EXIT, print, shortTime, table } from '../output.js';

export function ledgerCommand(getHome: () => string): Command {
  const cmd = new Command('ledger')
    .description("a thread's execution record (what was asked, paid, received, validated and applied), or verify the whole chain")
    .addHelpText('after', '\nExamples:\n  combine ledger 3f2a9c1e-…          # one thread\n  combine ledger verify              # hash chain + completeness');

  withCommonOptions(cmd.command('show', { isDefault: true }).argument('<thread-id>').description("show a thread's ledger entries")).action(
    async (threadId: string, opts: CommonOptions) => {
      const entries = await withDaemon(getHome(), opts, ({ client }, signal) => client.ledger.thread.query({ thread_id: threadId }, { signal }));
      print(opts, entries, () =>
        entries.length === 0
          ? 'no ledger entries yet'
          : table([
              ['SEQ', 'TIME', 'TYPE', 'ATTEMPT', 'SUMMARY', ''],
              ...entries.map((e) => [String(e.seq), shortTime(e.created_at), e.entry_type, String(e.attempt ?? ''), e.summary, '']),
            ]) + `\n\nchain head for this thread: ${entries[entries.length - 1]!.hash}`,
      );
    },
  );

  withCommonOptions(cmd.command('verify').description('check the hash chain and every thread’s completeness (exit 1 on the first break)')).action(
    async (opts: CommonOptions) => {
      const r = await withDaemon(getHome(), opts, ({ client }, signal) => client.ledger.verify.query(undefined, { signal }));
      print(opts, r, () => {
        const pruned = r.pruned_entries > 0 ? ` (+${r.pruned_entries} pruned, bridged by checkpoints)` : '';
        if (r.ok) return `ledger ok: ${r.entries} entries${pruned}, chain head ${r.head_hash ?? '(empty)'}`;
        const lines = ['ledger verification FAILED'];
        if (r.first_break) lines.push(`  entry ${r.first_break.seq}: ${r.first_break.reason}`);
        for (const i of r.incomplete.slice(0, 20)) lines.push(`  work item ${i.work_item_id}: ${i.reason}`);
        return lines.join('\n');
      });
      if (!r.ok) process.exitCode = EXIT.FAILED;
    },
  );
  return cmd;
}
