/**
 * A value storage refuses fails that one item, not the daemon, the same on both backends (issue 18).
 * Postgres refuses what SQLite stores — a U+0000 in text, a number out of its column's range — and such a
 * write fails the same way every time it runs. So what an operation's code or a provider puts in front of
 * storage is checked where it comes in (operations/runtime.ts, domain/completion.ts), and a refusal by a
 * path no check knows is that item's permanent error (db/errors.ts `refusedValueOf`, engine/failures.ts
 * `failRefusedWrite`): the item ends, charged once, its batch's other items apply, and health stays ready.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { RefusalRuns } from '../helpers/refusals.js';

const t = new RefusalRuns();
afterEach(() => t.cleanup());

describe('a value storage refuses', () => {
  it("a NUL that an operation's apply puts in a document part's key: dead-lettered naming the field, charged once; the rest apply", async () => {
    await t.setup();
    const ended = await t.runAll('nul');
    expect(ended.threads.get('p')).toMatchObject({ status: 'failed', usage: { calls: 1 } });
    expect(ended.items.get('p')).toMatchObject({ status: 'dead_letter', error_code: 'MUTATION_CONFLICT' });
    const message = ended.items.get('p')!.error_message!;
    expect(message).toContain('outline.apply: content sections[0].name holds the character U+0000 (NUL)');
    expect(message).not.toContain('\u0000');
    const ledger = await t.ledgerTypes('p');
    expect(ledger.map((e) => e.entry_type)).toEqual(['prompt', 'response', 'parse_report', 'error']);
    expect(ledger[3]!.payload).toMatchObject({ code: 'MUTATION_CONFLICT', class: 'permanent', next: 'dead_letter' });
    expect(await t.h.cli(['doc', 'p', 'outline'])).toMatchObject({ code: 2 });
    await t.expectOthersAppliedAndHealthy(ended);
  });

  it("a provider's usage no token column holds (3e9 tokens): the answer applied with its usage unknown, charged once", async () => {
    await t.setup((body, request) => {
      if (request.includes('Outline of Project p')) body.usage.prompt_tokens = 3e9;
      if (request.includes('Outline of Project q')) body.usage.completion_tokens = 1.5;
    });
    const ended = await t.runAll('ok');
    expect(ended.items.get('p')).toMatchObject({ status: 'applied' });
    expect(ended.threads.get('p')).toMatchObject({ status: 'complete', usage: { calls: 1 } });
    const charges = await t.h.query<{ project_id: string; status: string; prompt_tokens: number | null }>(
      'SELECT project_id, status, prompt_tokens FROM llm_charges ORDER BY project_id',
    );
    expect(charges.map((c) => [c.project_id, c.status, c.prompt_tokens === null])).toEqual([
      ['p', 'in_doubt', true],
      ['q', 'in_doubt', true],
      ['r', 'settled', false],
      ['s', 'settled', false],
    ]);
    // The body is kept as received: its usage too.
    expect((await t.ledgerTypes('p'))[1]!.payload.body.usage.prompt_tokens).toBe(3e9);
    await t.expectOthersAppliedAndHealthy(ended);
  });
});
