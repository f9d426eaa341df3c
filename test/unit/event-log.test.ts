/**
 * The buffered engine-event log builds its lines itself (written out member by member): they must be the
 * lines pino writes for the same events with the daemon's logger options, byte for byte but the time.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { EngineEvent } from '../../src/daemon/engine/events.js';
import { createEventLog, createLogger, LogFile, unbufferedEventLog } from '../../src/daemon/runtime/logger.js';

const events: EngineEvent[] = [
  {
    type: 'thread',
    thread_id: 'th_1',
    parent_thread_id: null,
    trace_id: 'a'.repeat(32),
    status: 'running',
    kind: 'story.generate_epic',
    target_ref: { doc_type: 'stories', project_id: 'p1', epic_id: 'E1' },
  },
  {
    type: 'work_item',
    thread_id: 'th_1',
    parent_thread_id: 'th_0',
    trace_id: null,
    work_item_id: 'wi_1',
    status: 'applied',
    attempt: 1,
    error_code: null,
    not_before: null,
  },
  {
    type: 'ledger',
    thread_id: 'th_1',
    parent_thread_id: null,
    trace_id: null,
    work_item_id: null,
    seq: 42,
    entry_type: 'error',
    attempt: 2,
    code: 'PROVIDER_5XX',
    next: 'retry',
    summary: 'a "quoted" summary \\ with ünïcode and a\nnewline',
  },
  {
    type: 'ledger',
    thread_id: 'th_2',
    parent_thread_id: 'th_0',
    trace_id: 'b'.repeat(32),
    work_item_id: 'wi_2',
    seq: 43,
    entry_type: 'response',
    attempt: 1,
    code: null,
    next: null,
    summary: 'HTTP 200 in 3 ms, 120+300 tokens',
  },
  {
    type: 'work_item',
    thread_id: 'th_2',
    parent_thread_id: null,
    trace_id: null,
    work_item_id: 'wi_"2"',
    status: 'queued',
    attempt: 2,
    error_code: 'PROVIDER_5XX',
    not_before: 1_795_000_000_000,
  },
];

const withoutTime = (text: string) => text.replace(/"ts":"[^"]*"/g, '"ts":"T"');

describe('engine event log', () => {
  let dir: string | undefined;
  afterEach(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('writes the lines pino writes for the same events', () => {
    dir = mkdtempSync(join(tmpdir(), 'cmb-event-log-'));
    const buffered = createEventLog(join(dir, 'buffered.log'), 'info');
    for (const e of events) buffered.log(e);
    buffered.close();
    const viaPino = unbufferedEventLog(createLogger(join(dir, 'pino.log'), 'info'));
    for (const e of events) viaPino.log(e);
    const ours = readFileSync(join(dir, 'buffered.log'), 'utf8');
    expect(ours.split('\n')).toHaveLength(events.length + 1);
    expect(withoutTime(ours)).toBe(withoutTime(readFileSync(join(dir, 'pino.log'), 'utf8')));
  });

  it('builds no line when the level leaves out info lines', () => {
    dir = mkdtempSync(join(tmpdir(), 'cmb-event-log-'));
    const file = new LogFile(join(dir, 'daemon.log'));
    const log = createEventLog(file, 'warn');
    for (const e of events) log.log(e);
    log.close();
    file.close();
    expect(readFileSync(join(dir, 'daemon.log'), 'utf8')).toBe('');
  });
});
