/** `combine replay <thread-id> [--apply] [--response <seq>]`. */
import { Command } from 'commander';
import type { ReplayReport } from '../../ledger/replay.js';
import { withCommonOptions, type CommonOptions } from '../common.js';
import { withDaemon } from '../daemon-control.js';
import { EXIT, print } from '../output.js';
import { CliError } from '../../core/errors.js';

interface ReplayOptions extends CommonOptions {
  apply?: boolean;
  response?: string;
}

function render(r: ReplayReport): string {
  const recorded =
    r.recorded.parse_ok === null
      ? 'never validated'
      : r.recorded.parse_ok
        ? `valid, ${r.recorded.applied ? 'applied' : 'not applied'}`
        : `rejected: ${r.recorded.errors.slice(0, 3).join('; ')}`;
  const noun = Object.keys(r.replayed).find((k) => !['ok', 'stage', 'errors', 'items'].includes(k)) ?? 'items';
  const today = r.replayed.ok ? `valid: ${r.replayed.items} ${noun}` : `rejected (${r.replayed.stage}): ${r.replayed.errors.slice(0, 5).join('; ')}`;
  const lines = [`thread ${r.thread_id} (${r.thread_status}), recorded response #${r.response_seq}`, `  recorded    ${recorded}`, `  today       ${today}`];
  if (r.plan) {
    const { doc_type, key, document_version, difference, ...summary } = r.plan;
    const facts = Object.entries(summary)
      .filter(([, v]) => typeof v !== 'object' || v === null)
      .map(([k, v]) => `${k} ${String(v)}`);
    lines.push(
      `  plan        ${doc_type}${key ? ` ${key}` : ''} v${document_version} → v${document_version + 1}${facts.length > 0 ? `: ${facts.join(', ')}` : ''}`,
    );
    const d = difference as { added?: string[]; removed?: string[]; changed?: string[]; unchanged?: number } | undefined;
    if (d && Array.isArray(d.added) && Array.isArray(d.removed) && Array.isArray(d.changed)) {
      lines.push(
        `  difference  ${d.added.length} added, ${d.removed.length} removed, ${d.changed.length} changed, ${d.unchanged ?? 0} unchanged`,
        ...d.added.map((t) => `    + ${t}`),
        ...d.removed.map((t) => `    - ${t}`),
        ...d.changed.map((t) => `    ~ ${t}`),
      );
    }
  }
  if (r.applied) {
    lines.push('', `queued work item ${r.applied.work_item_id} to apply it without a provider call`, `follow it: combine thread ${r.thread_id} --follow`);
  } else if (r.replayed.ok && r.thread_status === 'failed') {
    lines.push('', `apply it without a provider call: combine replay ${r.thread_id} --apply`);
  }
  return lines.join('\n');
}

export function replayCommand(getHome: () => string): Command {
  return withCommonOptions(
    new Command('replay')
      .argument('<thread-id>')
      .description(
        "run today's parsing, validation and mutation planning over a thread's recorded answer (no provider call) and show the difference from what is applied",
      )
      .option('--apply', 'apply it through the normal path: a new work item of the (failed) thread, ledger entries marked replay_of')
      .option('--response <seq>', 'replay this response entry (default: the thread’s newest)')
      .addHelpText(
        'after',
        [
          '',
          "Exit codes: 0 today's validation accepts the answer (and, with --apply, it was queued);",
          '            1 it is rejected, or --apply was refused (the thread is not failed).',
          '',
          'Examples:',
          "  combine replay 3f2a9c1e-…                 # what would today's code do with the recorded answer?",
          '  combine replay 3f2a9c1e-… --apply         # rescue a dead-lettered thread without paying again',
          '  combine replay 3f2a9c1e-… --response 12 --json',
        ].join('\n'),
      ),
  ).action(async (threadId: string, opts: ReplayOptions) => {
    let seq: number | null = null;
    if (opts.response !== undefined) {
      seq = Number(opts.response);
      if (!Number.isInteger(seq) || seq < 1) throw new CliError(`--response: "${opts.response}" is not a ledger entry number`, EXIT.USAGE);
    }
    const r = await withDaemon(getHome(), opts, ({ client }, signal) =>
      client.replay.mutate({ thread_id: threadId, apply: !!opts.apply, response_seq: seq }, { signal }),
    );
    await print(opts, r, () => render(r));
    if (!r.replayed.ok) process.exitCode = EXIT.FAILED;
  });
}
