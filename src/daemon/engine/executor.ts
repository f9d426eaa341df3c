/**
 * The executor runs one provider call for one work item. It never touches the database: it takes the
 * recorded request and returns an outcome for the completer to record.
 */
import type { ClassifiedError } from '../../domain/errors.js';
import type { ChatRequest } from '../../domain/prompts.js';
import type { Provider, RawResponse } from '../provider.js';
import { classifyCallError } from './classify.js';

export type CallOutcome =
  | ({ kind: 'response'; latencyMs: number } & RawResponse)
  | { kind: 'error'; error: ClassifiedError; latencyMs: number };

/**
 * Sends `request` with a deadline of `timeoutMs`; `cancel` aborts it (a user's cancel). Never throws:
 * every failure comes back classified.
 */
export async function executeCall(
  provider: Provider,
  request: ChatRequest,
  opts: { cancel: AbortSignal; timeoutMs: number; now: () => number; secrets?: readonly string[] },
): Promise<CallOutcome> {
  const deadline = AbortSignal.timeout(opts.timeoutMs);
  const signal = AbortSignal.any([opts.cancel, deadline]);
  const started = performance.now();
  try {
    const raw = await provider.send(request, signal, opts.timeoutMs);
    return { kind: 'response', latencyMs: Math.round(performance.now() - started), ...raw };
  } catch (err) {
    const error = classifyCallError(err, { canceled: opts.cancel.aborted, timedOut: deadline.aborted }, opts.now(), opts.secrets);
    return { kind: 'error', error, latencyMs: Math.round(performance.now() - started) };
  }
}
