/**
 * A provider's body holding U+0000 outside what `checkAnswer` walks (review-pgnul findings 1 and 2): the
 * item still ends, the same on both backends. A proxy in front of the simulator rewrites each 200 body;
 * `JSON.stringify` puts a raw NUL on the wire as the JSON escape `\u0000`, as a provider would (and half a
 * surrogate pair as its escape, `\ud83d`).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { type AnswerProxy, startAnswerProxy } from '../helpers/answer-proxy.js';
import { FAST_RETRY, Harness, project, waitUntil, type CommandJson } from '../helpers/harness.js';

let h: Harness;
let proxy: AnswerProxy | null = null;
afterEach(async () => {
  await h?.cleanup();
  await proxy?.close();
  proxy = null;
});

async function throughProxy(edit: (body: any) => void, config: object = FAST_RETRY): Promise<void> {
  h = await Harness.start();
  h.writeConfig(config);
  await h.stopDaemon();
  proxy = await startAnswerProxy(h.sim.url, edit);
  h.env.OPENAI_BASE_URL = proxy.url;
  await h.startDaemon();
  await h.importProject(project('p', 2));
}

function cronFiringSoon(): string {
  const d = new Date(Math.ceil((Date.now() + 5000) / 1000) * 1000);
  return `${d.getUTCSeconds()} ${d.getUTCMinutes()} ${d.getUTCHours()} * * *`;
}

describe('a raw U+0000 from the provider', () => {
  it('an answer that is not JSON, starting with a NUL: dead-lettered SCHEMA_INVALID, the reason kept with the NUL escaped', async () => {
    await throughProxy(
      (b) => {
        b.choices[0].message.content = `\u0000${b.choices[0].message.content}`;
      },
      { ...FAST_RETRY, engine: { lease: '3s', recovery_interval: '1s' } },
    );
    const r = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E1']);
    const end = await waitUntil(
      async () => {
        const [t] = await h.query<{ status: string }>('SELECT status FROM llm_threads WHERE id = ?', [r.thread_id]);
        return t && t.status !== 'open' && t.status !== 'running' ? t : null;
      },
      'the thread to end',
      20_000,
    ).catch(async (e) => {
      const items = await h.query('SELECT status, attempt, error_code FROM llm_work_items');
      const failures = h
        .logText()
        .split('\n')
        .filter((l) => l.includes('work item step failed')).length;
      throw new Error(`${(e as Error).message}; items ${JSON.stringify(items)}; provider calls ${h.sim.calls.length}; step failures logged ${failures}`);
    });
    expect(end.status).toBe('failed');
    const [item] = await h.query<{ error_code: string; error_message: string }>('SELECT error_code, error_message FROM llm_work_items');
    expect(item!.error_code).toBe('SCHEMA_INVALID');
    expect(item!.error_message).toContain('the answer is not JSON');
    expect(item!.error_message).toContain('\\u0000');
    expect(item!.error_message).not.toContain('\0');
  });

  // A NUL's escape, and half a surrogate pair's (22P02 in jsonb where the NUL's is 22P05): db/dialect.ts `jsonText`.
  for (const [what, fingerprint, escaped] of [
    ['a NUL', 'fp\u0000x', 'fp\\u0000x'],
    ['half a surrogate pair', 'fp\ud83dx', 'fp\\ud83dx'],
  ] as const) {
    it(`a valid answer with ${what} in system_fingerprint, run by a schedule: the run is finalized with its usage`, async () => {
      await throughProxy((b) => {
        b.system_fingerprint = fingerprint;
      });
      // the control: the same answer outside a schedule is applied
      const r = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E1']);
      expect((await h.waitForEnd(r.thread_id)).status).toBe('complete');
      const s = await h.json(['schedule', 'add', '--project', 'p', '--operation', 'briefing', '--cron', cronFiringSoon()]);
      const [run] = await waitUntil(
        async () => {
          const list = await h.json<any[]>(['schedule', 'runs', s.schedule_id]);
          return list.length === 1 && list[0].status !== 'pending' ? list : null;
        },
        'the run to be finalized',
        30_000,
      );
      const responses = await h.query<{ thread_id: string; payload: string }>(
        "SELECT thread_id, payload FROM llm_ledger_entries WHERE entry_type = 'response'",
      );
      expect(responses.every((e) => e.payload.includes(escaped))).toBe(true);
      // Its usage read from the response's body, as on SQLite: the body's escape does not stop the sum.
      const own = responses.find((e) => e.thread_id === run.thread_id)!;
      expect(run).toMatchObject({ status: 'complete', usage: { responses: 1, total_tokens: JSON.parse(own.payload).usage.total_tokens } });
    });
  }
});
