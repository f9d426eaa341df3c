/** Reading an OpenAI-compatible chat completion body (the envelope around the model's answer). */

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

export type CompletionEnvelope =
  | { ok: true; body: unknown; content: string | null; usage: Usage | null; finishReason: string | null }
  | { ok: false; body: unknown; error: string };

/** Parses a response body's text and reads its envelope; never throws. */
export function parseCompletionEnvelope(bodyText: string): CompletionEnvelope {
  let body: unknown;
  try {
    body = JSON.parse(bodyText);
  } catch {
    return { ok: false, body: null, error: 'the provider answered a body that is not JSON' };
  }
  return readCompletionBody(body);
}

/**
 * The most tokens a usage count may say: what the charges' token columns hold on both backends (integer
 * on Postgres, which refuses more: 22003).
 */
const MAX_TOKENS = 2 ** 31 - 1;

/**
 * A count a provider can mean: a whole number from 0 to MAX_TOKENS. Any other (a fraction, a negative, 3e9)
 * makes the usage unknown (null: the charge is settled `in_doubt`), on both backends alike, rather than
 * a write Postgres refuses while SQLite stores it.
 */
function isTokenCount(n: unknown): n is number {
  return Number.isInteger(n) && (n as number) >= 0 && (n as number) <= MAX_TOKENS;
}

/**
 * Extracts the first choice's message content and the usage from a parsed body; never throws. A usage
 * whose counts are not token counts (`isTokenCount`) is null.
 */
export function readCompletionBody(body: unknown): CompletionEnvelope {
  if (body === null || body === undefined) {
    return { ok: false, body: null, error: 'the provider answered a body that is not JSON' };
  }
  const b = body as {
    choices?: { message?: { content?: unknown }; finish_reason?: unknown }[];
    usage?: Partial<Usage>;
  };
  const choice = Array.isArray(b?.choices) ? b.choices[0] : undefined;
  if (!choice || typeof choice !== 'object' || !choice.message) {
    return { ok: false, body, error: 'the provider answered JSON without choices[0].message' };
  }
  const content = typeof choice.message.content === 'string' ? choice.message.content : null;
  const u = b.usage;
  const prompt = u?.prompt_tokens;
  const completion = u?.completion_tokens;
  const total = typeof u?.total_tokens === 'number' ? u.total_tokens : isTokenCount(prompt) && isTokenCount(completion) ? prompt + completion : undefined;
  const usage =
    isTokenCount(prompt) && isTokenCount(completion) && isTokenCount(total)
      ? { prompt_tokens: prompt, completion_tokens: completion, total_tokens: total }
      : null;
  const finishReason = typeof choice.finish_reason === 'string' ? choice.finish_reason : null;
  return { ok: true, body, content, usage, finishReason };
}
