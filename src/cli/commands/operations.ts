/** `combine run`, `combine operations [show | check]` and `combine doc`: any operation, any document. */
import { readFileSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import { Command } from 'commander';
import type { OperationDetailView, OperationSummaryView } from '../../daemon/services/operation-views.js';
import type { DocumentView } from '../../daemon/views.js';
import { parseDeadline, traceparentOf, withCommonOptions, withTraceparentOption, type CommonOptions } from '../common.js';
import { withDaemon } from '../daemon-control.js';
import { EXIT, print, table } from '../output.js';
import { renderDryRun, reportAndFollow } from './generate.js';
import { CliError } from '../../core/errors.js';

/** The daemon refuses larger inputs too; reading a huge file first would only waste memory. */
const MAX_INPUT_FILE_BYTES = 256 * 1024;

interface RunOptions extends CommonOptions {
  input?: string;
  inputFile?: string;
  force?: boolean;
  follow?: boolean;
  deadline?: string;
  dryRun?: boolean;
  traceparent?: string;
}

function parseJson(text: string, what: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new CliError(`${what}: not valid JSON (${(err as Error).message})`, EXIT.USAGE);
  }
}

/** The request's input: `--input` JSON, or `--input-file`'s content (`{}` when neither is given). */
export function readInput(opts: { input?: string; inputFile?: string }): unknown {
  if (opts.input !== undefined && opts.inputFile !== undefined) throw new CliError('give --input or --input-file, not both', EXIT.USAGE);
  if (opts.inputFile === undefined) return opts.input === undefined ? {} : parseJson(opts.input, '--input');
  const path = resolve(opts.inputFile);
  let size: number;
  try {
    size = statSync(path).size;
  } catch {
    throw new CliError(`--input-file: cannot read ${path}`, EXIT.USAGE);
  }
  if (size > MAX_INPUT_FILE_BYTES) throw new CliError(`--input-file: ${path} is larger than ${MAX_INPUT_FILE_BYTES} bytes`, EXIT.USAGE);
  return parseJson(readFileSync(path, 'utf8'), `--input-file ${path}`);
}

function runCommand(getHome: () => string): Command {
  return withCommonOptions(
    withTraceparentOption(new Command('run'))
      .argument('<operation>', 'an operation name (see `combine operations`)')
      .description('run any operation on an input (idempotent: the same request returns the same thread)')
      .option('--input <json>', "the operation's input, as JSON")
      .option('--input-file <path>', 'read the input from a JSON file')
      .option('--force', 'run again even if the same request completed')
      .option('--follow', 'stream the thread until it ends (exit 1 if it fails)')
      .option('--deadline <duration>', 'fail with SKIPPED_DEADLINE if not started within this time (e.g. 10m)')
      .option('--dry-run', 'print the calls and the most they can cost; enqueue nothing')
      .addHelpText(
        'after',
        [
          '',
          'Prints {"thread_id","status","deduplicated"}; invalid input exits 2 naming the field, and nothing is stored.',
          '',
          'Examples:',
          '  combine run release_notes --input \'{"project_id":"acme","version":"1.2.0","changes":["Fix login"]}\' --follow',
          '  combine run release_notes --input-file changes.json --json',
          '  combine run release_notes --input-file changes.json --dry-run',
        ].join('\n'),
      ),
  ).action(async (operation: string, opts: RunOptions) => {
    const home = getHome();
    const input = readInput(opts);
    if (opts.dryRun) {
      if (opts.follow) throw new CliError('--dry-run and --follow cannot be combined: a dry run starts nothing', EXIT.USAGE);
      const d = await withDaemon(home, opts, ({ client }, signal) => client.runDryRun.query({ operation, input }, { signal }));
      print(opts, d, () => renderDryRun(d));
      return;
    }
    const deadline_ms = parseDeadline(opts.deadline);
    const traceparent = traceparentOf(opts);
    const r = await withDaemon(home, opts, ({ client }, signal) =>
      client.run.mutate({ operation, input, force: !!opts.force, deadline_ms, created_by: process.env.USER ?? null, traceparent }, { signal }),
    );
    process.exitCode = await reportAndFollow(home, r, opts);
  });
}

function renderDetail(d: OperationDetailView): string {
  const json = (v: unknown) => JSON.stringify(v, null, 2).replace(/\n/g, '\n    ');
  return [
    `${d.name} — ${d.description}`,
    `  source     ${d.source}`,
    `  role       ${d.role}${d.child ? ` (one ${d.child} thread per child)` : ''}`,
    `  identity   ${d.identity}`,
    `  model      ${d.model}${d.provider_model ? ` (${d.provider_model})` : ''}${d.escalate_to ? `; an invalid answer escalates to ${d.escalate_to}` : ''}`,
    `  priority   ${d.priority}`,
    `  retry      ${d.retry.max_attempts} attempts, backoff ${d.retry.base_ms} ms doubling up to ${d.retry.cap_ms} ms, ${d.retry.repair_attempts} repair(s)`,
    `  input      ${json(d.input)}`,
    ...(d.output ? [`  output     ${json(d.output)}`] : []),
    ...(d.rules ? [`  rules      ${json(d.rules.schema)}`, `  configured ${json(d.rules.configured)}`] : []),
  ].join('\n');
}

function operationsCommand(getHome: () => string): Command {
  const cmd = withCommonOptions(
    new Command('operations')
      .description('list the operations this daemon runs: built-ins and modules in COMBINE_HOME/operations/')
      .addHelpText(
        'after',
        '\nExamples:\n  combine operations\n  combine operations show release_notes --json\n  combine operations check ./release_notes.mjs',
      ),
  ).action(async (opts: CommonOptions) => {
    const list = await withDaemon(getHome(), opts, ({ client }, signal) => client.operations.list.query(undefined, { signal }));
    print(opts, list, () =>
      table([['NAME', 'MODEL', 'SOURCE', 'DESCRIPTION'], ...list.map((o: OperationSummaryView) => [o.name, o.model, o.source, o.description])]),
    );
  });

  withCommonOptions(
    cmd
      .command('show')
      .argument('<name>')
      .description("an operation's input and output schemas, identity format and defaults")
      .addHelpText('after', '\nExample:\n  combine operations show release_notes --json'),
  ).action(async (name: string, _opts: CommonOptions, command: Command) => {
    // `--json` may also be read by the parent command (it has its own): take both.
    const opts = command.optsWithGlobals<CommonOptions>();
    const d = await withDaemon(getHome(), opts, ({ client }, signal) => client.operations.show.query({ name }, { signal }));
    print(opts, d, () => renderDetail(d));
  });

  withCommonOptions(
    cmd
      .command('check')
      .argument('<file>', 'an operation module (.mjs, or a CommonJS .js)')
      .description('validate an operation module without a daemon (exit 2 naming the field when it is not valid)')
      .addHelpText('after', '\nExample:\n  combine operations check ~/.local/state/combine/operations/release_notes.mjs'),
    false,
  ).action(async (file: string, _opts: CommonOptions, command: Command) => {
    const opts = command.optsWithGlobals<CommonOptions>();
    // Loaded on demand: the validator (ajv) is only needed here and in the daemon.
    const { checkOperationModule } = await import('../../operations/check.js');
    const r = await checkOperationModule(resolve(file));
    if (!r.ok) throw new CliError(r.error, EXIT.USAGE);
    print(opts, r, () => `ok: ${r.file} defines ${r.role === 'orchestration' ? 'orchestration' : 'operation'} ${r.name} — ${r.description}`);
  });
  return cmd;
}

function docCommand(getHome: () => string): Command {
  return withCommonOptions(
    new Command('doc')
      .argument('<project-id>')
      .argument('<doc_type>', 'e.g. story_backlog, epic_architecture, briefing, or what an operation writes')
      .description("print a project's document (exit 1 while it is still being generated)")
      .option('--key <key>', 'for documents that exist once per key (e.g. a briefing per date); default: the newest')
      .addHelpText('after', '\nExamples:\n  combine doc acme story_backlog --json\n  combine doc acme briefing --key 2026-03-01'),
  ).action(async (projectId: string, docType: string, opts: CommonOptions & { key?: string }) => {
    const d = await withDaemon(getHome(), opts, ({ client }, signal) =>
      client.document.query({ project_id: projectId, doc_type: docType, key: opts.key ?? null }, { signal }),
    );
    print(opts, d, () => renderDocument(d));
  });
}

function renderDocument(d: Omit<DocumentView, 'content'> & { content?: unknown }): string {
  return [`${d.project_id} ${d.doc_type}${d.key ? ` ${d.key}` : ''} v${d.version} (updated ${d.updated_at})`, JSON.stringify(d.content, null, 2)].join('\n');
}

export function operationCommands(getHome: () => string): Command[] {
  return [runCommand(getHome), operationsCommand(getHome), docCommand(getHome)];
}
