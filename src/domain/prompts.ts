/**
 * The chat request an operation's call sends (operations render their messages: src/operations). The
 * rendered request is recorded verbatim in the `prompt` ledger entry and sent as-is, so what the ledger
 * says was asked is exactly what was asked.
 */

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

export interface JsonSchemaFormat {
  type: 'json_schema';
  json_schema: { name: string; strict: boolean; schema: Record<string, unknown> };
}

/** An OpenAI-compatible chat completion request body. */
export interface ChatRequest {
  model: string;
  messages: ChatMessage[];
  /** Absent with `provider.response_format` "none". */
  response_format?: JsonSchemaFormat | { type: 'json_object' };
  temperature: number;
  max_tokens: number;
}

/** A request as an operation renders it: with its answer schema as the response format. */
export type SchemaChatRequest = ChatRequest & { response_format: JsonSchemaFormat };

/** How structured output is asked for (config `provider.response_format`). */
export type ResponseFormatMode = 'json_schema' | 'json_object' | 'none';

export interface ModelParams {
  model: string;
  temperature: number;
  maxTokens: number;
  /** Default `json_schema`. */
  responseFormat?: ResponseFormatMode;
}

/**
 * The request in the form the provider accepts. `json_schema` (the default) sends the answer's schema
 * as the response format; for servers that refuse it, `json_object` asks only for a JSON object and
 * `none` for nothing, and the schema is written into the system message instead. The answer is
 * validated against the schema in every mode.
 */
export function withResponseFormat(request: ChatRequest, mode: ResponseFormatMode): ChatRequest {
  const format = request.response_format;
  if (mode === 'json_schema' || format?.type !== 'json_schema') return request;
  const { response_format: _sent, ...rest } = request;
  const instruction = `The JSON object must match this JSON schema:\n${JSON.stringify(format.json_schema.schema)}`;
  const [first, ...others] = request.messages;
  const messages =
    first?.role === 'system'
      ? [{ ...first, content: `${first.content}\n${instruction}` }, ...others]
      : [{ role: 'system' as const, content: instruction }, ...request.messages];
  return { ...rest, messages, ...(mode === 'json_object' ? { response_format: { type: 'json_object' as const } } : {}) };
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
