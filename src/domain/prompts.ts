/**
 * Prompt rendering. The rendered request is recorded verbatim in the `prompt` ledger entry and sent
 * as-is, so what the ledger says was asked is exactly what was asked. A golden file under test/ pins
 * the rendering: a prompt change shows in review.
 */
import { STORIES_JSON_SCHEMA } from './backlog.js';
import { BRIEFING_JSON_SCHEMA, type ProjectFacts } from './briefing.js';
import type { Epic } from './project.js';

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
    first?.role === 'system' ? [{ ...first, content: `${first.content}\n${instruction}` }, ...others] : [{ role: 'system' as const, content: instruction }, ...request.messages];
  return { ...rest, messages, ...(mode === 'json_object' ? { response_format: { type: 'json_object' as const } } : {}) };
}

const STORY_SYSTEM_PROMPT = [
  'You are a senior product manager writing a story backlog.',
  'Write user stories for exactly one epic. Each story has a short title, a description in the form',
  '"As a <role>, I want <capability>, so that <benefit>", and concrete, testable acceptance criteria.',
  'Answer with one JSON object only: {"stories":[{"title","description","acceptance_criteria":[...]}]}.',
].join('\n');

/** The request for `story_generate_epic`: the epic's id, title and description, and the answer schema. */
export function renderStoryPrompt(project: { id: string; name: string }, epic: Epic, params: ModelParams): SchemaChatRequest {
  const user = [
    `Project: ${project.name} (id: ${project.id})`,
    `Epic id: ${epic.id}`,
    `Epic title: ${epic.title}`,
    'Epic description:',
    epic.description.trim() === '' ? '(none given)' : epic.description.trim(),
    '',
    'Write between 3 and 8 user stories that together deliver this epic.',
  ].join('\n');
  return {
    model: params.model,
    messages: [
      { role: 'system', content: STORY_SYSTEM_PROMPT },
      { role: 'user', content: user },
    ],
    response_format: {
      type: 'json_schema',
      json_schema: { name: 'story_list', strict: false, schema: STORIES_JSON_SCHEMA as unknown as Record<string, unknown> },
    },
    temperature: params.temperature,
    max_tokens: params.maxTokens,
  };
}

const BRIEFING_SYSTEM_PROMPT = [
  'You are a delivery lead writing a short status briefing about one software project for its team.',
  'Use only the facts given. Say plainly what is done, what failed and what is still running.',
  'Answer with one JSON object only: {"summary","highlights":[...],"risks":[...],"next_steps":[...]}.',
].join('\n');

/** The request for `project_briefing`: the project's state on `date`, and the answer schema. */
export function renderBriefingPrompt(
  project: { id: string; name: string },
  date: string,
  facts: ProjectFacts,
  params: ModelParams,
): SchemaChatRequest {
  const counts = Object.entries(facts.threads)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([status, n]) => `${n} ${status}`);
  const threadLine = (t: ProjectFacts['failed'][number]) =>
    `- ${t.kind} for ${t.target} (thread ${t.thread_id}, since ${t.created_at}${t.error_code ? `, error ${t.error_code}` : ''})`;
  const user = [
    `Project: ${project.name} (id: ${project.id})`,
    `Briefing date: ${date}`,
    '',
    'Epics and the stories generated for them:',
    ...(facts.epics.length === 0 ? ['(no epics)'] : facts.epics.map((e) => `- ${e.epic_id} "${e.title}": ${e.stories} stories`)),
    '',
    `Generation threads: ${counts.length === 0 ? 'none yet' : counts.join(', ')}`,
    'Failed threads:',
    ...(facts.failed.length === 0 ? ['(none)'] : facts.failed.map(threadLine)),
    'Running threads:',
    ...(facts.running.length === 0 ? ['(none)'] : facts.running.map(threadLine)),
    '',
    'Write the briefing: a two or three sentence summary, then highlights, risks and next steps (each may be empty).',
  ].join('\n');
  return {
    model: params.model,
    messages: [
      { role: 'system', content: BRIEFING_SYSTEM_PROMPT },
      { role: 'user', content: user },
    ],
    response_format: {
      type: 'json_schema',
      json_schema: { name: 'project_briefing', strict: false, schema: BRIEFING_JSON_SCHEMA as unknown as Record<string, unknown> },
    },
    temperature: params.temperature,
    max_tokens: params.maxTokens,
  };
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
