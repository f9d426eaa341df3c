/**
 * Starting, finding and stopping the daemon from the CLI. A command that needs the daemon starts it in
 * the background when it is not running (unless --no-autostart); the daemon outlives the CLI.
 */
import { closeSync, fstatSync, mkdirSync, openSync, readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { connectHttp, openSocket, probeSocket, toCliError, type Connection } from './client.js';
import { capLowersHeapLimit, daemonArgv, daemonEnv } from './daemon-heap.js';
import { homeFiles } from './home.js';
import { EXIT } from './output.js';
import { CliError } from '../core/errors.js';
import { systemClock } from '../core/clock.js';

const START_TIMEOUT_MS = 15_000;
/** What a daemon that lost the one-daemon-per-home race prints (daemon/main.ts). */
const ALREADY_RUNNING = 'a daemon is already running for';
/** Deadline for an ordinary call: a daemon that does not answer in this time is unreachable (exit 3). */
export const CALL_TIMEOUT_MS = 4_000;
/**
 * Deadline for a command whose one transaction grows with the project (generate-all writes a thread and a
 * work item per epic; cancel ends every child): 10,000 children take seconds to commit on a loaded
 * machine, and a CLI that gave up at 4 s would say "unreachable" about work that was stored.
 */
export const BULK_CALL_TIMEOUT_MS = 30_000;

function sleep(ms: number) {
  return new Promise((r) => setTimeout(r, ms));
}

/** The last lines of daemon.log written after byte `from` (this start's, not earlier failures'), for error messages. */
export function logTail(home: string, lines = 8, from = 0): string {
  try {
    const text = readFileSync(homeFiles(home).log).subarray(from).toString('utf8').trimEnd();
    return text === '' ? '(nothing in daemon.log from this start)' : text.split('\n').slice(-lines).join('\n');
  } catch {
    return '(no daemon.log)';
  }
}

/**
 * Whether the daemon answering on `socket` has finished starting, as `combine health` would show it: its
 * start-up recovery scan has run, or the start is held by storage (a full disk or a database refusing
 * writes, which health names — the command should run and show it rather than wait). The daemon serves
 * its socket before that scan so that health can say why a start is held; a CLI that started it waits
 * for the scan, so that the first command sees a daemon that is ready, not one half-started. False when
 * the daemon does not answer: the caller asks again, and a daemon that exited meanwhile (its start failed
 * after it served the socket) is reported with its log instead of as a reset connection.
 */
async function startFinished(socket: string): Promise<boolean> {
  const conn = connectHttp(socket);
  try {
    const { checks } = await conn.client.health.query(undefined, { signal: AbortSignal.timeout(CALL_TIMEOUT_MS) });
    return checks.recovery_scan_done || !checks.storage || !checks.database;
  } catch {
    return false;
  } finally {
    conn.close();
  }
}

/**
 * Starts the daemon (`combine daemon run`'s own entry, daemon-heap.ts `daemonArgv`) detached and waits until its socket answers and its start has finished
 * (startFinished). If another daemon already serves this home, returns without starting a second one.
 */
export async function startDaemon(home: string, env: NodeJS.ProcessEnv = process.env, runArgs: string[] = []): Promise<{ started: boolean }> {
  const files = homeFiles(home);
  if (await probeSocket(files.socket)) return { started: false };
  mkdirSync(home, { recursive: true, mode: 0o700 });
  const log = openSync(files.log, 'a', 0o600);
  const logStart = fstatSync(log).size;
  // Loaded here, not at the top: only a start needs it, and every CLI run would pay for loading it.
  const { spawn } = await import('node:child_process');
  const child = spawn(process.execPath, daemonArgv(fileURLToPath(new URL('.', import.meta.url)), runArgs), {
    detached: true,
    stdio: ['ignore', log, log],
    env: daemonEnv({ ...env, COMBINE_HOME: home }, await capLowersHeapLimit()),
  });
  closeSync(log);
  let exited: number | null = null;
  child.once('exit', (code) => (exited = code ?? 1));
  child.unref();
  const deadline = systemClock.now() + START_TIMEOUT_MS;
  let answering = false;
  while (systemClock.now() < deadline) {
    answering = await probeSocket(files.socket);
    if (answering && (await startFinished(files.socket))) return { started: exited === null };
    // Exit 1 because another start won the race (it says so in the log): keep waiting for its socket.
    // Any other exit (a failed migration, a bad config) is this start's failure.
    if (exited !== null && (exited !== 1 || !logTail(home, 20, logStart).includes(ALREADY_RUNNING))) {
      throw new CliError(`the daemon failed to start (exit ${exited}):\n${logTail(home, 8, logStart)}`, exited === 2 ? EXIT.USAGE : EXIT.FAILED);
    }
    await sleep(exited === null ? 20 : 100);
  }
  // Up, with its recovery scan still running after all this time: the command goes ahead (health says so).
  if (answering) return { started: exited === null };
  throw new CliError(`the daemon did not start within ${START_TIMEOUT_MS / 1000}s:\n${logTail(home, 8, logStart)}`, EXIT.UNREACHABLE);
}

/** Connects to the daemon, starting it first when allowed. Exit 3 if it is down and may not be started. */
export async function connectDaemon(home: string, opts: { autostart?: boolean }): Promise<Connection> {
  const files = homeFiles(home);
  const opened = await openSocket(files.socket);
  if (opened) return connectHttp(files.socket, opened);
  if (opts.autostart === false) {
    throw new CliError(`the combine daemon is not running (no answer on ${files.socket}); start it with \`combine daemon start\``, EXIT.UNREACHABLE);
  }
  await startDaemon(home);
  return connectHttp(files.socket);
}

/** Runs `fn` with a connected client and a deadline; maps every failure to the CLI's exit codes. */
export async function withDaemon<T>(
  home: string,
  opts: { autostart?: boolean },
  fn: (c: Connection, signal: AbortSignal) => Promise<T>,
  timeoutMs: number = CALL_TIMEOUT_MS,
): Promise<T> {
  const conn = await connectDaemon(home, opts);
  try {
    return await fn(conn, AbortSignal.timeout(timeoutMs));
  } catch (err) {
    throw toCliError(err);
  } finally {
    conn.close();
  }
}

export function readDaemonPid(home: string): number | null {
  try {
    const pid = Number(readFileSync(homeFiles(home).pid, 'utf8').trim());
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

/**
 * Whether `pid` still runs. A zombie (exited, not yet reaped by its parent) counts as gone — but only once
 * every thread of it has exited: a SIGKILLed process's main thread turns zombie while its other threads may
 * still be exiting, and its files (the daemon's listening socket among them) close with the last thread.
 * Until then a client can still connect to that socket and be reset (`read ECONNRESET`), which a start right
 * after a crash took for a running daemon.
 */
export function isAlive(pid: number): boolean {
  let tasks: string[];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    // No /proc entry: gone on Linux; elsewhere ask the kernel.
    if (process.platform === 'linux') return false;
    try {
      process.kill(pid, 0);
      return true;
    } catch (err) {
      return (err as NodeJS.ErrnoException).code === 'EPERM';
    }
  }
  return tasks.some((task) => {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${task}/stat`, 'utf8');
      return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
    } catch {
      return false; // this thread has gone since the listing
    }
  });
}

/** Waits for a process to exit; false if it is still alive at the deadline. */
export async function waitForExit(pid: number, timeoutMs: number): Promise<boolean> {
  const deadline = systemClock.now() + timeoutMs;
  while (systemClock.now() < deadline) {
    if (!isAlive(pid)) return true;
    await sleep(50);
  }
  return !isAlive(pid);
}
