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
 * An item's abort: its controller, which the user's cancel and its call's deadline abort (the call's one
 * abort signal; one per lease, never reused), and whether the user canceled, set before the cancel aborts:
 * a cancel is CANCELED whenever it comes before the call settles, even after the deadline aborted.
 */
export interface ItemAbort {
  readonly controller: AbortController;
  canceledByUser: boolean;
}

/** The user's cancel of an item's call: marked as the user's first, then aborted (a no-op if the deadline already did). */
export function cancelCall(abort: ItemAbort): void {
  abort.canceledByUser = true;
  abort.controller.abort();
}

/**
 * Sends `request` with a deadline of `timeoutMs`. `cancel` is the item's own abort: the user's cancel
 * aborts its controller, and so does the deadline (with a `TimeoutError`), so the call has one abort signal. Never
 * throws: every failure comes back classified. Not itself async: while the call waits for the model, only
 * `settle` is suspended, and it does not hold the request (an async function keeps its parameters alive
 * until it returns — 2,000 prompts at target 6).
 */
export function executeCall(
  provider: Provider,
  request: ChatRequest,
  opts: {
    cancel: ItemAbort;
    timeoutMs: number;
    now: () => number;
    secrets?: readonly string[];
    maxProviderWaitMs?: number | undefined;
    headers?: Record<string, string>;
  },
): Promise<CallOutcome> {
  const deadline = new CallDeadline(opts.cancel, opts.timeoutMs);
  const started = performance.now();
  let sent: Promise<RawResponse>;
  try {
    sent = provider.send(request, opts.cancel.controller.signal, opts.headers ?? {});
  } catch (err) {
    sent = Promise.reject(err);
  }
  return settle(sent, started, deadline, opts);
}

/**
 * The call's deadline: one timer, cleared when the call settles, that aborts the item's controller with a
 * `TimeoutError` unless it is already aborted. The provider fails a `TimeoutError` abort as a timeout.
 */
class CallDeadline {
  private readonly timer: NodeJS.Timeout;
  timedOut = false;

  constructor(
    readonly cancel: ItemAbort,
    timeoutMs: number,
  ) {
    this.timer = setTimeout(() => {
      // Canceled first: the cancel stands (the user's word, as when it came before the call).
      if (cancel.controller.signal.aborted) return;
      this.timedOut = true;
      cancel.controller.abort(new DOMException('The operation timed out.', 'TimeoutError'));
    }, timeoutMs);
    this.timer.unref();
  }

  /** The user canceled before the call settled: before or after the deadline, the cancel stands (CANCELED, never a timeout). */
  get canceled(): boolean {
    return this.cancel.canceledByUser;
  }

  /** The call settled: nothing of it waits for the deadline any more. */
  release(): void {
    clearTimeout(this.timer);
  }
}

async function settle(
  sent: Promise<RawResponse>,
  started: number,
  deadline: CallDeadline,
  opts: { now: () => number; secrets?: readonly string[]; maxProviderWaitMs?: number | undefined },
): Promise<CallOutcome> {
  try {
    const raw = redactResponse(await sent, opts.secrets ?? []);
    return { kind: 'response', latencyMs: Math.round(performance.now() - started), ...raw };
  } catch (err) {
    const aborts = { canceled: deadline.canceled, timedOut: deadline.timedOut };
    const error = classifyCallError(err, aborts, opts.now(), { secrets: opts.secrets, maxProviderWaitMs: opts.maxProviderWaitMs });
    return { kind: 'error', error, latencyMs: Math.round(performance.now() - started) };
  } finally {
    deadline.release();
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
