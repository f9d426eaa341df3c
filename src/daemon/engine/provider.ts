/**
 * The engine's provider port: what the engine needs from a model endpoint — one call, an answer whose
 * body nobody but the engine reads. The daemon plugs in the OpenAI-compatible client
 * (daemon/openai-provider.ts); benchmarks and tests plug in their own.
 */
import type { ChatRequest } from '../../domain/prompts.js';

/** A 2xx answer, body unread by anyone but us. */
export interface RawResponse {
  httpStatus: number;
  bodyText: string;
  requestId: string | null;
  /** Rate-limit headers (`x-ratelimit-*`), kept for the limiter and the ledger. */
  rateLimit: Record<string, string>;
}

export interface Provider {
  /** Identifies the endpoint (for breakers and the ledger); never contains credentials. */
  readonly endpoint: string;
  /**
   * Sends one request (`headers`: sent with it — the call's W3C `traceparent`). `signal` ends it: the
   * user's cancel, or the engine's deadline (executor.ts), whose abort reason is a `TimeoutError`
   * DOMException — the call's only deadline. Throws the client's own errors; the engine classifies them
   * (classify.ts).
   */
  send(request: ChatRequest, signal: AbortSignal, headers: Record<string, string>): Promise<RawResponse>;
}
