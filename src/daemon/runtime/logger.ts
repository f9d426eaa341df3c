/**
 * pino JSON logs to COMBINE_HOME/daemon.log. Secrets never reach the log: the API key is not passed to
 * any log call, the redaction paths below catch keys and Authorization headers that an error object
 * might carry (the SDK's request options, HTTP headers), and every configured secret's value is cut
 * out of each line before it is written.
 *
 * A log write that fails (a full disk) never takes the daemon down: the line is dropped and counted
 * (`LogFile.dropped`, shown by `combine health`).
 */
import { closeSync, openSync, writeSync } from 'node:fs';
import pino from 'pino';
import { redactValues } from '../../domain/errors.js';
import type { Logger } from '../../core/logger.js';
import type { EngineEvent } from '../engine/events.js';

export const REDACT_PATHS = [
  'apiKey',
  'api_key',
  '*.apiKey',
  '*.api_key',
  'authorization',
  'Authorization',
  '*.authorization',
  '*.Authorization',
  'headers.authorization',
  '*.headers.authorization',
  'err.headers.authorization',
  'err.request.headers.authorization',
  'err.headers["x-api-key"]',
  'headers["x-api-key"]',
];

/** The line shape both loggers write: {"level":"info","ts":"<ISO time>","pid":…,…}; `combine logs` renders it. */
function lineOptions(level: string): pino.LoggerOptions {
  return {
    level,
    base: { pid: process.pid },
    timestamp: () => `,"ts":"${new Date().toISOString()}"`,
    formatters: { level: (label) => ({ level: label }) },
  };
}

/**
 * The log file, written synchronously (a line logged just before a crash is on disk, not in a lost
 * buffer). Both loggers share it. A failed write drops its lines and counts them instead of throwing.
 */
export class LogFile {
  /** Lines dropped because a write failed (ENOSPC, EIO …) since the daemon started. */
  dropped = 0;
  private readonly fd: number;

  constructor(
    path: string,
    private readonly secrets: readonly string[] = [],
    private readonly onDrop: (err: unknown) => void = () => {},
  ) {
    this.fd = openSync(path, 'a', 0o600);
  }

  write(text: string, lines = 1): void {
    const buf = Buffer.from(this.secrets.length > 0 ? redactValues(text, this.secrets) : text);
    try {
      for (let off = 0; off < buf.length; ) off += writeSync(this.fd, buf, off);
    } catch (err) {
      this.dropped += lines;
      this.onDrop(err);
    }
  }

  close(): void {
    closeSync(this.fd);
  }
}

export function createLogger(destination: string | null, level = 'info', file?: LogFile): Logger {
  const options: pino.LoggerOptions = { ...lineOptions(level), redact: { paths: REDACT_PATHS, censor: '[redacted]' } };
  if (file) return pino(options, { write: (line: string) => file.write(line) });
  if (destination === null) return pino(options, pino.destination(1));
  return pino(options, pino.destination({ dest: destination, mkdir: true, sync: true }));
}

/** The log of engine events: one JSON line per event, written with one write per committed batch. */
export interface EventLog {
  /** Logs one engine event as one line; nothing is built when the level leaves out info lines. */
  log(e: EngineEvent): void;
  /** Writes the buffered lines now (synchronously). */
  flush(): void;
  close(): void;
}

/**
 * A second writer on the same file for engine events, the daemon's most frequent lines (about ten per
 * work item). Its lines are buffered and `flush()` writes them with one write(2): the App flushes right
 * after publishing a committed batch's events, in the same synchronous step, so lines reach the file as
 * promptly as before, only grouped (and, like the main log, without an fsync). Engine events have a
 * fixed shape with no credential fields (see events.ts), so this log skips the redaction pass. Each line
 * is the one pino writes for `info(eventRecord(e), message)` with the main log's options (the header, then
 * the record's keys in order, undefined ones left out), written out by `eventRecordText`: pino's per-key
 * formatting and a Date per line showed in the engine's CPU profile.
 */
export function createEventLog(destination: string | LogFile, level = 'info'): EventLog {
  const file = typeof destination === 'string' ? new LogFile(destination) : destination;
  const enabled = pino(lineOptions(level), { write: () => {} }).isLevelEnabled('info');
  const header = `{"level":"info","ts":"`;
  const pid = `","pid":${process.pid},`;
  // A committed batch's lines share the millisecond they are built in: its ISO text is made once.
  let lastMs = Number.NaN;
  let lastTs = '';
  let lines: string[] = [];
  return {
    log(e) {
      if (!enabled) return;
      const ms = Date.now();
      if (ms !== lastMs) {
        lastMs = ms;
        lastTs = new Date(ms).toISOString();
      }
      lines.push(`${header}${lastTs}${pid}${eventRecordText(e)}\n`);
    },
    flush() {
      if (lines.length === 0) return;
      const text = lines.join('');
      const n = lines.length;
      lines = [];
      file.write(text, n);
    },
    close() {
      this.flush();
      if (typeof destination === 'string') file.close();
    },
  };
}

/**
 * An engine event's fields as its log line has them: thread_id and work_item_id on every line (null for
 * thread-level events); pino adds `msg`.
 */
function eventRecord(e: EngineEvent): Record<string, unknown> {
  const { type, ...fields } = e;
  return { component: 'engine', event: type, work_item_id: null, ...fields };
}

/** `,"<key>":` of each event field's key, made once. */
const keyTexts = new Map<string, string>();

/**
 * `JSON.stringify({ ...eventRecord(e), msg: eventMessage(e) })` without its opening brace, written out: the same
 * members in the same order, each value as JSON.stringify writes it, undefined ones left out — without
 * the two copies of the event (its rest, then the record) that one stringify needed (~15 % of each
 * line's CPU, bench/README.md 2026-11-26 10:33). Engine events have no `component`, `event` or `msg` field (events.ts), which the
 * record's own would otherwise give way to; test/unit/event-log.test.ts compares the lines with pino's.
 */
function eventRecordText(e: EngineEvent): string {
  const fields = e as unknown as Record<string, unknown>;
  let text = `"component":"engine","event":${JSON.stringify(e.type)}`;
  // The record's third member: the event's own work_item_id in its place (left out when it writes as nothing), else null.
  if (!('work_item_id' in fields)) text += ',"work_item_id":null';
  else {
    const idText = JSON.stringify(fields.work_item_id) as string | undefined;
    if (idText !== undefined) text += `,"work_item_id":${idText}`;
  }
  for (const key in fields) {
    if (key === 'type' || key === 'work_item_id' || !Object.hasOwn(fields, key)) continue;
    const value = fields[key];
    const valueText = value === null ? 'null' : JSON.stringify(value);
    if (valueText === undefined) continue;
    let keyText = keyTexts.get(key);
    if (keyText === undefined) keyTexts.set(key, (keyText = `,${JSON.stringify(key)}:`));
    text += keyText + valueText;
  }
  return `${text},"msg":${JSON.stringify(eventMessage(e))}}`;
}

function eventMessage(e: EngineEvent): string {
  return `${e.type} ${'status' in e ? e.status : e.entry_type}`;
}

/** An event log that writes through `logger` line by line (in-process uses: tests, benchmarks). */
export function unbufferedEventLog(logger: Logger): EventLog {
  return {
    log: (e) => logger.info(eventRecord(e), eventMessage(e)),
    flush() {},
    close() {},
  };
}
