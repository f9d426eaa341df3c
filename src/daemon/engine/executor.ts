/**
 * The executor runs one provider call for one work item. It never touches the database: it takes the
 * recorded request and returns an outcome for the completer to record.
 */
import { redactValues, type ClassifiedError } from '../../domain/errors.js';
import type { ChatRequest } from '../../domain/prompts.js';
import { classifyCallError } from './classify.js';
import type { Provider, RawResponse } from './provider.js';

export type CallOutcome = ({ kind: 'response'; latencyMs: number } & RawResponse) | { kind: 'error'; error: ClassifiedError; latencyMs: number };

/**
 * Sends `request` with a deadline of `timeoutMs`; `cancel` aborts it (a user's cancel). Never throws:
 * every failure comes back classified. Not itself async: while the call waits for the model, only
 * `settle` is suspended, and it does not hold the request (an async function keeps its parameters alive
 * until it returns — 2,000 prompts at target 6).
 */
export function executeCall(
  provider: Provider,
  request: ChatRequest,
  opts: {
    cancel: AbortSignal;
    timeoutMs: number;
    now: () => number;
    secrets?: readonly string[];
    maxProviderWaitMs?: number | undefined;
    headers?: Record<string, string>;
  },
): Promise<CallOutcome> {
  const call = new CallSignal(opts.cancel, opts.timeoutMs);
  const started = performance.now();
  let sent: Promise<RawResponse>;
  try {
    sent = provider.send(request, call.signal, opts.timeoutMs, opts.headers ?? {});
  } catch (err) {
    sent = Promise.reject(err);
  }
  return settle(sent, started, call, opts);
}

/**
 * The call's one abort signal: the user's cancel or the deadline, whichever comes first. One controller,
 * one listener and one timer, all let go as soon as the call settles. `AbortSignal.any` with
 * `AbortSignal.timeout` made three signals, their weak references and a timer per call, and the timer
 * outlived the call until its deadline (a minute by default).
 */
class CallSignal {
  private readonly controller = new AbortController();
  private readonly timer: NodeJS.Timeout;
  timedOut = false;

  constructor(
    readonly cancel: AbortSignal,
    timeoutMs: number,
  ) {
    this.timer = setTimeout(() => {
      this.timedOut = true;
      this.controller.abort(new DOMException('The operation timed out.', 'TimeoutError'));
    }, timeoutMs);
    this.timer.unref();
    if (cancel.aborted) this.controller.abort(cancel.reason);
    else cancel.addEventListener('abort', this.onCancel, { once: true });
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  private readonly onCancel = () => this.controller.abort(this.cancel.reason);

  /** The call settled: nothing of it waits for the deadline or the cancel any more. */
  release(): void {
    clearTimeout(this.timer);
    this.cancel.removeEventListener('abort', this.onCancel);
  }
}

async function settle(
  sent: Promise<RawResponse>,
  started: number,
  call: CallSignal,
  opts: { now: () => number; secrets?: readonly string[]; maxProviderWaitMs?: number | undefined },
): Promise<CallOutcome> {
  try {
    const raw = redactResponse(await sent, opts.secrets ?? []);
    return { kind: 'response', latencyMs: Math.round(performance.now() - started), ...raw };
  } catch (err) {
    const aborts = { canceled: call.cancel.aborted, timedOut: call.timedOut };
    const error = classifyCallError(err, aborts, opts.now(), { secrets: opts.secrets, maxProviderWaitMs: opts.maxProviderWaitMs });
    return { kind: 'error', error, latencyMs: Math.round(performance.now() - started) };
  } finally {
    call.release();
  }
}

/**
 * A provider that echoes a credential (in its body, request id or headers) must not get it recorded:
 * the ledger is append-only and hashed, so what is written there stays. Redacted here, before anyone
 * records, hashes or logs the answer.
 */
function redactResponse(raw: RawResponse, secrets: readonly string[]): RawResponse {
  if (secrets.length === 0) return raw;
  const clean = (v: string) => redactValues(v, secrets);
  return {
    httpStatus: raw.httpStatus,
    bodyText: clean(raw.bodyText),
    requestId: raw.requestId === null ? null : clean(raw.requestId),
    rateLimit: Object.fromEntries(Object.entries(raw.rateLimit).map(([k, v]) => [clean(k), clean(v)])),
  };
}
