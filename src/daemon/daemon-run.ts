/**
 * The daemon process's own entry, dist/daemon-run.js: `node <DAEMON_NODE_FLAGS> dist/daemon-run.js
 * [--metrics-port <port>] [--http-port <port>]` runs what `combine daemon run` runs — the same options,
 * home (COMBINE_HOME, else the XDG state directory), log lines, messages and exit codes — without the
 * CLI's bundle. `combine daemon start`, the systemd unit and the benchmarks start it (cli/daemon-heap.ts
 * `daemonArgv`); a process that has loaded the CLI (commander, the tRPC client, every command's code and
 * the bundle's source) keeps all of it resident for the daemon's life: ~5 MiB (issue 20 target 3).
 */
import { parseArgs } from 'node:util';
import { DaemonStartError } from '../core/errors.js';
import { resolveHome } from '../core/home.js';
import { daemonRunPorts } from '../core/port.js';
import { runDaemon } from './main.js';

/** What the CLI prints for a failure, so that a start's caller reads the same line from either entry. */
function fail(message: string, exitCode: number): void {
  process.stderr.write(`combine: ${message}\n`);
  process.exitCode = exitCode;
}

async function main(): Promise<void> {
  let options: { metricsPort?: number; httpPort?: number };
  try {
    const { values } = parseArgs({ options: { 'metrics-port': { type: 'string' }, 'http-port': { type: 'string' } }, strict: true });
    options = daemonRunPorts(values['metrics-port'], values['http-port']);
  } catch (err) {
    // An unknown option or a bad port: a usage error, as commander's (exit 2).
    return fail((err as Error).message, 2);
  }
  try {
    await runDaemon({ home: resolveHome(), ...options });
  } catch (err) {
    if (err instanceof DaemonStartError) return fail(err.message, err.exitCode);
    fail(`unexpected error: ${(err as Error)?.stack ?? String(err)}`, 1);
  }
}

void main();
