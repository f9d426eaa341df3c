/** `combine ledger <thread-id>`, `combine ledger verify`, `combine ledger export` and `combine ledger import`. */
import { closeSync, constants, fchmodSync, openSync, readFileSync, renameSync, unlinkSync, writeSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { Command } from 'commander';
import type { DaemonClient } from '../client.js';
import { withCommonOptions, type CommonOptions } from '../common.js';
import { withDaemon } from '../daemon-control.js';
import { color, describeTargetRef, EXIT, plural, print, shortId, statusText, table, when } from '../output.js';
import { CliError } from '../../core/errors.js';

/** Export and import move whole threads' records; give them more time than an ordinary call. */
const TRANSFER_TIMEOUT_MS = 120_000;

type Entries = Awaited<ReturnType<DaemonClient['ledger']['thread']['query']>>;
type Children = Awaited<ReturnType<DaemonClient['threadChildren']['query']>>;

function entriesTable(entries: Entries): string {
  return table([
    ['SEQ', 'TIME', 'TYPE', 'ATTEMPT', 'SUMMARY'],
    ...entries.map((e) => [
      String(e.seq),
      when(e.created_at),
      e.entry_type === 'error' ? { text: e.entry_type, style: color().red } : e.entry_type,
      String(e.attempt ?? ''),
      e.summary,
    ]),
  ]);
}

/** One table for a thread; for an orchestration, its own entries and then one table per child. */
function renderLedger(entries: Entries, children: Children): string {
  if (entries.length === 0) return children.length > 0 ? 'no ledger entries yet (no child has started)' : 'no ledger entries yet';
  const head = `chain head for this thread: ${entries[entries.length - 1]!.hash}`;
  if (children.length === 0) return `${entriesTable(entries)}\n\n${head}`;
  const c = color();
  const sections: string[] = [];
  const childIds = new Set(children.map((ch) => ch.thread_id));
  const own = entries.filter((e) => !childIds.has(e.thread_id));
  if (own.length > 0) sections.push(entriesTable(own));
  for (const child of children) {
    const mine = entries.filter((e) => e.thread_id === child.thread_id);
    const error = child.error_code ? `  ${child.error_code}` : '';
    sections.push(
      [
        c.bold(`── ${describeTargetRef(child.target_ref)}  ${shortId(child.thread_id)}  `) + statusText(child.status) + error,
        mine.length > 0 ? entriesTable(mine) : '  no ledger entries yet',
      ].join('\n'),
    );
  }
  return `${sections.join('\n\n')}\n\n${head}`;
}

export function ledgerCommand(getHome: () => string): Command {
  const cmd = new Command('ledger')
    .description("a thread's execution record (what was asked, paid, received, validated and applied), or verify the whole chain")
    .addHelpText(
      'after',
      [
        '',
        'Examples:',
        '  combine ledger 9f3c2a1b                            # one thread (an orchestration: by child)',
        '  combine ledger verify                              # hash chain + completeness',
        '  combine ledger export 3f2a9c1e-… --out t.jsonl     # one thread (a generate-all with its children)',
        '  combine ledger export --project acme --out acme.jsonl',
        '  COMBINE_HOME=/other combine ledger import acme.jsonl',
      ].join('\n'),
    );

  withCommonOptions(
    cmd
      .command('show', { isDefault: true })
      .argument('<thread-id>', 'the whole id, the short id, or any unique prefix of either')
      .description("show a thread's ledger entries (an orchestration's: its children's, grouped by child)"),
  ).action(async (threadId: string, opts: CommonOptions) => {
    const [entries, children] = await withDaemon(getHome(), opts, ({ client }, signal) =>
      Promise.all([
        client.ledger.thread.query({ thread_id: threadId }, { signal }),
        opts.json ? [] : client.threadChildren.query({ thread_id: threadId }, { signal }),
      ]),
    );
    await print(opts, entries, () => renderLedger(entries, children));
  });

  withCommonOptions(cmd.command('verify').description('check the hash chain and every thread’s completeness (exit 1 on the first break)')).action(
    async (opts: CommonOptions) => {
      const r = await withDaemon(getHome(), opts, ({ client }, signal) => client.ledger.verify.query(undefined, { signal }));
      await print(opts, r, () => {
        const pruned = r.pruned_entries > 0 ? `, ${r.pruned_entries} pruned (bridged by checkpoints)` : '';
        const imported = r.imported.entries > 0 ? `, ${r.imported.entries} imported (each matching its source hash)` : '';
        if (r.ok) return `ledger ok: ${plural(r.entries, 'entry', 'entries')}${pruned}${imported}, chain head ${r.head_hash ?? '(empty)'}`;
        const lines = ['ledger verification FAILED'];
        if (r.first_break) lines.push(`  entry ${r.first_break.seq}: ${r.first_break.reason}`);
        for (const i of r.incomplete.slice(0, 20)) {
          const where = [`thread ${i.thread_id}`, ...(i.work_item_id ? [`work item ${i.work_item_id}`] : [])].join(', ');
          lines.push(`  ${i.seq === null ? 'no entry' : `entry ${i.seq}`} (${where}): ${i.reason}`);
        }
        if (r.imported.first_mismatch) lines.push(`  imported entry ${r.imported.first_mismatch.seq}: ${r.imported.first_mismatch.reason}`);
        if (r.incomplete.length > 20) lines.push(`  … and ${r.incomplete.length - 20} more (see --json)`);
        return lines.join('\n');
      });
      if (!r.ok) process.exitCode = EXIT.FAILED;
    },
  );
  withCommonOptions(
    cmd
      .command('export')
      .argument('[thread-id]', 'the thread to export (a generate-all exports its children too)')
      .option('--project <id>', 'export every finished thread of this project instead')
      .option('--out <file>', 'write the JSONL to this new file, mode 0600 (default: standard output)')
      .option('--force', 'with --out: replace an existing file (a symlink is replaced, never followed)')
      .description('write finished threads and their ledger entries as self-verifying JSONL')
      .addHelpText('after', '\nExamples:\n  combine ledger export 3f2a9c1e-… > thread.jsonl\n  combine ledger export --project acme --out acme.jsonl'),
  ).action(async (threadId: string | undefined, opts: CommonOptions & { project?: string; out?: string; force?: boolean }) => {
    if ((threadId === undefined) === (opts.project === undefined)) throw new CliError('give a thread id or --project <id> (one of them)', EXIT.USAGE);
    const r = await withDaemon(
      getHome(),
      opts,
      ({ client }, signal) => client.ledger.export.query({ thread_id: threadId ?? null, project_id: opts.project ?? null }, { signal }),
      TRANSFER_TIMEOUT_MS,
    );
    const text = `${r.lines.join('\n')}\n`;
    for (const id of r.skipped) process.stderr.write(`combine: skipped thread ${id}: it is still running\n`);
    if (opts.out === undefined) {
      process.stdout.write(text);
      return;
    }
    writeExportFile(opts.out, text, opts.force === true);
    const { lines: _lines, ...summary } = r;
    await print(
      opts,
      { file: opts.out, ...summary },
      () => `exported ${r.threads} threads, ${r.work_items} work items, ${r.entries} ledger entries to ${opts.out}`,
    );
  });

  withCommonOptions(
    cmd
      .command('import')
      .argument('<file>', 'a file written by `combine ledger export`')
      .description('verify an export and add its threads and ledger entries to this home (nothing is written if any check fails)')
      .addHelpText(
        'after',
        '\nExit codes: 0 imported (or already imported), 1 the file does not verify, 2 not an export file.\n\nExample:\n  COMBINE_HOME=/backup combine ledger import acme.jsonl',
      ),
  ).action(async (file: string, opts: CommonOptions) => {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      throw new CliError(`cannot read ${file}: ${(err as Error).message}`, EXIT.USAGE);
    }
    const r = await withDaemon(getHome(), opts, ({ client }, signal) => client.ledger.import.mutate({ text }, { signal }), TRANSFER_TIMEOUT_MS);
    await print(opts, r, () =>
      r.result === 'already_imported'
        ? `already imported (${r.import_id.slice(0, 12)}): nothing to do`
        : `verified and imported ${plural(r.threads, 'thread')}, ${plural(r.work_items, 'work item')}, ${plural(r.entries, 'ledger entry', 'ledger entries')} (${plural(r.linked, 'link')} checked) as entries ${r.first_seq}–${r.last_seq}`,
    );
  });
  return cmd;
}

/**
 * Writes an export to a new file, mode 0600: never through a symlink (O_NOFOLLOW with O_EXCL), never
 * over an existing file unless `force` — and then by renaming a new private file over the path, which
 * replaces a symlink itself rather than the file it points to.
 */
function writeExportFile(path: string, text: string, force: boolean): void {
  const target = force ? join(dirname(path), `.${basename(path)}.${process.pid}.tmp`) : path;
  let fd: number;
  try {
    fd = openSync(target, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST' && !force) {
      throw new CliError(`--out: ${path} already exists (or is a symlink); choose a new file or add --force to replace it`, EXIT.USAGE);
    }
    throw new CliError(`--out: cannot create ${path}: ${(err as Error).message}`, EXIT.USAGE);
  }
  try {
    fchmodSync(fd, 0o600); // whatever the umask
    for (let buf = Buffer.from(text), off = 0; off < buf.length; ) off += writeSync(fd, buf, off);
    closeSync(fd);
    if (target !== path) renameSync(target, path);
  } catch (err) {
    try {
      closeSync(fd);
    } catch {
      // already closed
    }
    try {
      unlinkSync(target);
    } catch {
      // nothing to clean
    }
    throw new CliError(`--out: cannot write ${path}: ${(err as Error).message}`, EXIT.USAGE);
  }
}
