/**
 * The canary's bookkeeping on a fake clock (issue 16, item 6): when one is due, its latency from submit
 * to applied, lateness after `canary.timeout` (health unready), a replaced (superseded) canary whose
 * lateness carries over to the one that replaced it, and a failed one. The daemon side — the canary
 * really going through claim, record, answer and apply — is test/integration/canary.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { CanaryService } from '../../src/daemon/canary/service.js';
import type { EngineEvent } from '../../src/daemon/engine/events.js';
import { createLogger } from '../../src/daemon/runtime/logger.js';

function setup() {
  let now = 1_000_000;
  let n = 0;
  const submitted: string[] = [];
  const listeners: ((e: EngineEvent) => void)[] = [];
  const canary = new CanaryService({
    intervalMs: 60_000,
    timeoutMs: 30_000,
    clock: { now: () => now },
    logger: createLogger(null, 'silent'),
    submit: async () => {
      const id = `t${++n}`;
      submitted.push(id);
      return { thread_id: id };
    },
    subscribe: (l) => {
      listeners.push(l);
      return () => {};
    },
  });
  canary.start();
  canary.stop(); // no timer: the test ticks by hand; the subscription stays
  const end = (threadId: string, status: string) => {
    const e: EngineEvent = {
      type: 'thread',
      thread_id: threadId,
      parent_thread_id: null,
      trace_id: null,
      status,
      kind: 'combine_canary',
      target_ref: { doc_type: 'canary', project_id: 'combine:system' },
    };
    for (const l of listeners) l(e);
  };
  return { canary, submitted, end, advance: (ms: number) => (now += ms) };
}

describe('canary service', () => {
  it('submits one every interval and records its latency from submit to applied', async () => {
    const t = setup();
    await t.canary.tick();
    expect(t.submitted).toEqual([]); // the first one is one interval after start
    t.advance(60_000);
    await t.canary.tick();
    await t.canary.tick(); // not due again yet
    expect(t.submitted).toEqual(['t1']);
    t.advance(1_500);
    t.end('t1', 'complete');
    expect(t.canary.snapshot()).toMatchObject({ ok: true, last_latency_ms: 1_500, pending: null, last_failure: null });
    expect(t.canary.lastSuccessAt).toBe(1_061_500);
  });

  it('is late after the timeout (not ok); a canary that replaced an unstarted one inherits its start; success clears it', async () => {
    const t = setup();
    t.advance(60_000);
    await t.canary.tick();
    t.advance(30_000);
    expect(t.canary.ok).toBe(true); // exactly the timeout: not yet late
    t.advance(1);
    expect(t.canary.ok).toBe(false);
    expect(t.canary.snapshot().pending).toMatchObject({ thread_id: 't1', late: true });
    t.advance(29_999);
    await t.canary.tick(); // the next one supersedes t1 (still queued)
    t.end('t1', 'canceled');
    expect(t.canary.snapshot().pending).toMatchObject({ thread_id: 't2', late: true });
    t.advance(2_000);
    t.end('t2', 'complete');
    expect(t.canary.ok).toBe(true);
    expect(t.canary.lastLatencyMs).toBe(62_000); // from t1's submit: the pipeline was stuck that long
  });

  it('a failed canary is reported until one succeeds', async () => {
    const t = setup();
    t.advance(60_000);
    await t.canary.tick();
    t.end('t1', 'failed');
    expect(t.canary.snapshot()).toMatchObject({ ok: false, pending: null, last_failure: { reason: 'thread t1 failed' } });
    t.advance(60_000);
    await t.canary.tick();
    t.end('t2', 'complete');
    expect(t.canary.snapshot()).toMatchObject({ ok: true, last_failure: null });
  });
});
