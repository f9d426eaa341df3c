/**
 * The opt-in response cache: an identical temperature-0 request is answered from the recorded answer
 * — one provider call for two runs — and the copy is marked `cached_from` with no usage.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { FAST_RETRY, Harness, project, type CommandJson } from '../helpers/harness.js';

let h: Harness;
afterEach(() => h?.cleanup());

async function run(args: string[]) {
  const r = await h.json<CommandJson>(args);
  const final = await h.waitForEnd(r.thread_id);
  return { final, ledger: await h.json<any[]>(['ledger', r.thread_id]) };
}

describe('response cache', () => {
  it('two identical calls make one provider call; the second is a cached copy with no usage', async () => {
    h = await Harness.start();
    h.writeConfig({ ...FAST_RETRY, cache: true, provider: { temperature: 0 } });
    await h.importProject(project('p', 2));
    const first = await run(['generate-epic', '--project', 'p', '--epic', 'E1']);
    const second = await run(['generate-epic', '--project', 'p', '--epic', 'E1', '--force']);
    expect([first.final.status, second.final.status]).toEqual(['complete', 'complete']);
    expect(h.sim.calls).toHaveLength(1);

    const paid = first.ledger.find((e) => e.entry_type === 'response');
    expect(second.ledger.map((e) => e.entry_type)).toEqual(['prompt', 'response', 'parse_report', 'mutation_report']);
    const [prompt, cached, report] = second.ledger;
    // The prompt is still recorded: the ledger shows what was asked, and that nothing was paid for it.
    expect(prompt.payload.request).toEqual(first.ledger[0].payload.request);
    expect(cached.payload).toMatchObject({ cached_from: paid.seq, usage: null, request_id: null, latency_ms: 0 });
    expect(cached.payload.body).toEqual(paid.payload.body);
    expect(cached.summary).toContain(`cached from #${paid.seq}`);
    expect(report.payload).toMatchObject({ ok: true, cached_from: paid.seq });

    const stats = await h.json(['stats']);
    expect(stats.calls).toBe(1);
    expect(stats.tokens.prompt).toBe(paid.payload.usage.prompt_tokens);

    // A different request is not served from the cache.
    await run(['generate-epic', '--project', 'p', '--epic', 'E2']);
    expect(h.sim.calls).toHaveLength(2);
    expect(await h.json(['ledger', 'verify'])).toMatchObject({ ok: true, incomplete: [] });
  });

  it('is off by default: the same request is paid again', async () => {
    h = await Harness.start();
    h.writeConfig({ ...FAST_RETRY, provider: { temperature: 0 } });
    await h.importProject(project('p', 1));
    await run(['generate-epic', '--project', 'p', '--epic', 'E1']);
    const second = await run(['generate-epic', '--project', 'p', '--epic', 'E1', '--force']);
    expect(h.sim.calls).toHaveLength(2);
    expect(second.ledger[1].payload.cached_from).toBeUndefined();

    // Answers recorded while it was off are reused once it is turned on.
    await h.stopDaemon();
    h.writeConfig({ ...FAST_RETRY, cache: true, provider: { temperature: 0 } });
    const third = await run(['generate-epic', '--project', 'p', '--epic', 'E1', '--force']);
    expect(h.sim.calls).toHaveLength(2);
    expect(third.ledger[1].payload.cached_from).toBe(second.ledger[1].seq);
  });

  it('refuses cache: true unless the temperature is 0, naming the field (exit 2)', async () => {
    h = await Harness.start();
    h.writeConfig({ cache: true });
    const r = await h.cli(['daemon', 'start']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/cache: needs provider\.temperature 0/);
  });
});
