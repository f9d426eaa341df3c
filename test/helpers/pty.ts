/**
 * Runs the real CLI in a real pseudo-terminal, for what only happens on a terminal (colour, relative
 * times, the progress bar, Ctrl-C). The terminal comes from util-linux's `script` (package bsdutils,
 * which every Debian system has: it is Essential), so tests need no native npm module.
 */
import { spawn } from 'node:child_process';
import { CLI } from './harness.js';

export interface PtyResult {
  /** Everything the terminal showed (stdout and stderr, with escape codes; lines end in \r\n). */
  output: string;
  code: number;
}

const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/**
 * `combine <args>` on a terminal of `cols`×`rows`. `interruptWhen` types Ctrl-C (sent through the
 * terminal, so the kernel delivers SIGINT as it would to a person's shell) once the output satisfies it.
 */
export function runInPty(
  args: string[],
  o: { env: NodeJS.ProcessEnv; cols?: number; rows?: number; interruptWhen?: (output: string) => boolean; timeoutMs?: number },
): Promise<PtyResult> {
  const command = `stty cols ${o.cols ?? 100} rows ${o.rows ?? 30}; exec ${quote(process.execPath)} ${quote(CLI)} ${args.map(quote).join(' ')}`;
  return new Promise((resolve, reject) => {
    const child = spawn('script', ['-q', '-f', '-e', '-c', command, '/dev/null'], { env: o.env, stdio: ['pipe', 'pipe', 'pipe'] });
    let output = '';
    let interrupted = false;
    const onData = (d: Buffer) => {
      output += d.toString('utf8');
      if (o.interruptWhen && !interrupted && o.interruptWhen(output)) {
        interrupted = true;
        child.stdin.write('\x03');
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    const timer = setTimeout(() => child.kill('SIGKILL'), o.timeoutMs ?? 45_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      child.stdin.destroy();
      resolve({ output, code: code ?? 1 });
    });
  });
}

/** The output without escape sequences, with \n line ends: what a person reads. */
export function plain(output: string): string {
  return output
    .replace(/\x1b\[[0-9;?]*[A-Za-z]/g, '')
    .replace(/\x1b[78]/g, '')
    .replace(/\r\n/g, '\n')
    .replace(/\r/g, '\n');
}
