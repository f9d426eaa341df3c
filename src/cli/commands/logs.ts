/** `combine logs [-f] [--thread <id>]`: daemon.log, readable. Reads the file; needs no daemon. */
import { closeSync, createReadStream, existsSync, openSync, readSync, statSync } from 'node:fs';
import { Command } from 'commander';
import { homeFiles } from '../home.js';
import { formatLogLine, matchesFilter, matchingThreadIds, parseLogLine, type LogFilter } from '../log-format.js';
import { EXIT } from '../output.js';
import { CliError } from '../../core/errors.js';

interface LogsOptions {
  follow?: boolean;
  thread?: string;
  lines?: string;
  json?: boolean;
}

const FOLLOW_POLL_MS = 200;

function render(line: string, filter: LogFilter, json: boolean): string | null {
  const parsed = parseLogLine(line);
  if (!matchesFilter(parsed, filter)) return null;
  if (json) return parsed ? line : null;
  return parsed ? formatLogLine(parsed) : line;
}

/**
 * What `--thread` names in this log: the one thread id matching what was typed (whole, or a prefix of
 * the id or of its short id). Several → exit 2 listing them; none → the text itself (for `-f`, a
 * thread that has not logged yet).
 */
async function resolveThreadFilter(path: string, typed: string): Promise<string> {
  if (!existsSync(path)) return typed;
  const found = new Set<string>();
  const { createInterface } = await import('node:readline');
  for await (const line of createInterface({ input: createReadStream(path), crlfDelay: Infinity })) {
    if (!line.includes('thread_id')) continue;
    for (const id of matchingThreadIds(parseLogLine(line), typed)) found.add(id);
  }
  if (found.size > 1) {
    const ids = [...found].sort();
    const listed = ids.slice(0, 10).map((id) => `  ${id}`);
    throw new CliError(
      [`"${typed}" matches ${ids.length} threads in the log; give more characters of one of:`, ...listed, ...(ids.length > 10 ? ['  …'] : [])].join('\n'),
      EXIT.USAGE,
    );
  }
  return found.size === 1 ? [...found][0]! : typed;
}

/** Prints the matching lines of the file (the last `limit` of them); returns the byte offset read up to. */
async function printExisting(path: string, filter: LogFilter, json: boolean, limit: number | null): Promise<number> {
  const size = statSync(path).size;
  if (size === 0) return 0;
  const tail: string[] = [];
  const { createInterface } = await import('node:readline'); // only `combine logs` reads lines
  const rl = createInterface({ input: createReadStream(path, { start: 0, end: size - 1 }), crlfDelay: Infinity });
  for await (const line of rl) {
    const out = render(line, filter, json);
    if (out === null) continue;
    if (limit === null) process.stdout.write(`${out}\n`);
    else {
      tail.push(out);
      if (tail.length > limit) tail.shift();
    }
  }
  for (const out of tail) process.stdout.write(`${out}\n`);
  return size;
}

/** Polls the file for appended bytes; a file that shrank (truncated or replaced) is read from its start. */
async function follow(path: string, from: number, filter: LogFilter, json: boolean): Promise<never> {
  let offset = from;
  let partial = '';
  for (;;) {
    await new Promise((r) => setTimeout(r, FOLLOW_POLL_MS));
    let size = 0;
    try {
      size = statSync(path).size;
    } catch {
      continue;
    }
    if (size < offset) {
      offset = 0;
      partial = '';
    }
    if (size === offset) continue;
    const buf = Buffer.alloc(size - offset);
    const fd = openSync(path, 'r');
    try {
      readSync(fd, buf, 0, buf.length, offset);
    } finally {
      closeSync(fd);
    }
    offset = size;
    const lines = (partial + buf.toString('utf8')).split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) {
      const out = render(line, filter, json);
      if (out !== null) process.stdout.write(`${out}\n`);
    }
  }
}

export function logsCommand(getHome: () => string): Command {
  return new Command('logs')
    .description("print the daemon's log (COMBINE_HOME/daemon.log) readably")
    .option('-f, --follow', 'keep printing lines as they are written (Ctrl-C to stop)')
    .option('--thread <id>', 'only lines about this thread and its children (whole id, short id, or a unique prefix)')
    .option('-n, --lines <n>', 'only the last n matching lines (default: all; 20 with --follow)')
    .option('--json', 'print the matching lines as the JSON objects they are')
    .addHelpText('after', ['', 'Examples:', '  combine logs -n 50', '  combine logs -f', '  combine logs --thread 9f3c2a1b --json'].join('\n'))
    .action(async (opts: LogsOptions) => {
      const path = homeFiles(getHome()).log;
      let limit: number | null = opts.follow ? 20 : null;
      if (opts.lines !== undefined) {
        limit = Number(opts.lines);
        if (!Number.isInteger(limit) || limit < 0) throw new CliError(`--lines: "${opts.lines}" is not a whole number`, EXIT.USAGE);
      }
      if (!existsSync(path)) {
        if (!opts.follow) throw new CliError(`no log yet at ${path} (the daemon writes it when it starts)`, EXIT.FAILED);
        await follow(path, 0, { thread: opts.thread }, opts.json ?? false);
      }
      const filter = { thread: opts.thread === undefined ? undefined : await resolveThreadFilter(path, opts.thread) };
      const offset = await printExisting(path, filter, opts.json ?? false, limit);
      if (opts.follow) await follow(path, offset, filter, opts.json ?? false);
    });
}
