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

/** Extracts the first choice's message content and the usage from a parsed body; never throws. */
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
  const usage =
    u && typeof u.prompt_tokens === 'number' && typeof u.completion_tokens === 'number'
      ? {
          prompt_tokens: u.prompt_tokens,
          completion_tokens: u.completion_tokens,
          total_tokens: typeof u.total_tokens === 'number' ? u.total_tokens : u.prompt_tokens + u.completion_tokens,
        }
      : null;
  const finishReason = typeof choice.finish_reason === 'string' ? choice.finish_reason : null;
  return { ok: true, body, content, usage, finishReason };
}
