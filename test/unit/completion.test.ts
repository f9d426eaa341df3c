import { describe, expect, it } from 'vitest';
import { readCompletionBody } from '../../src/domain/completion.js';

const body = (usage: unknown) => ({ choices: [{ message: { content: '{}' }, finish_reason: 'stop' }], usage });

describe("a completion's usage", () => {
  it('is read when its counts are token counts, the total summed when absent', () => {
    expect(readCompletionBody(body({ prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 }))).toMatchObject({ ok: true, usage: { total_tokens: 7 } });
    expect(readCompletionBody(body({ prompt_tokens: 3, completion_tokens: 4 }))).toMatchObject({ ok: true, usage: { total_tokens: 7 } });
    expect(readCompletionBody(body({ prompt_tokens: 2 ** 31 - 1, completion_tokens: 0 }))).toMatchObject({ usage: { prompt_tokens: 2 ** 31 - 1 } });
  });

  it('is unknown (null) when a count is not one a token column holds on both backends: a fraction, a negative, over 2^31 - 1', () => {
    for (const usage of [
      { prompt_tokens: 3e9, completion_tokens: 4 },
      { prompt_tokens: 1.5, completion_tokens: 4 },
      { prompt_tokens: 3, completion_tokens: -1 },
      { prompt_tokens: 3, completion_tokens: 4, total_tokens: 2 ** 31 },
      { prompt_tokens: 2 ** 31 - 1, completion_tokens: 1 },
      { prompt_tokens: '3', completion_tokens: 4 },
    ]) {
      expect(readCompletionBody(body(usage))).toMatchObject({ ok: true, content: '{}', usage: null });
    }
  });
});
