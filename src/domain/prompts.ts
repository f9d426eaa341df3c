/**
 * The chat request an operation's call sends. The rendered request is recorded verbatim in the
 * `prompt` ledger entry and sent as-is, so what the ledger says was asked is exactly what was asked.
 */

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

/** An OpenAI-compatible chat completion request body. */
export interface ChatRequest {
  model: string;
  messages: ChatMessage[];
  response_format: {
    type: 'json_schema';
    json_schema: { name: string; strict: boolean; schema: Record<string, unknown> };
  };
  temperature: number;
  max_tokens: number;
}

export interface ModelParams {
  model: string;
  temperature: number;
  maxTokens: number;
}

/**
 * A repair request: the original conversation, the model's invalid answer, and the validation errors,
 * asking for a corrected answer. Each repair is its own prompt/response pair in the ledger.
 */
export function renderRepairPrompt(original: ChatRequest, invalidAnswer: string, errors: readonly string[]): ChatRequest {
  const feedback = [
    'Your previous answer does not match the required JSON schema:',
    ...errors.map((e) => `- ${e}`),
    'Answer again with the complete, corrected JSON object and nothing else.',
  ].join('\n');
  return {
    ...original,
    messages: [...original.messages, { role: 'assistant', content: invalidAnswer }, { role: 'user', content: feedback }],
  };
}
