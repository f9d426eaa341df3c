/**
 * W3C Trace Context (https://www.w3.org/TR/trace-context/): `traceparent` =
 * `00-<32 hex trace id>-<16 hex parent span id>-<2 hex flags>`. Every command gets one: the caller's
 * trace continued when it sent a valid header (`--traceparent`, the HTTP `traceparent` header, or the
 * `TRACEPARENT` environment variable of the CLI), else a new trace.
 */
import { randomFillSync } from 'node:crypto';

export interface TraceContext {
  traceId: string;
  spanId: string;
  /** Bit 0: sampled. */
  flags: number;
}

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;
const ZERO_TRACE = '0'.repeat(32);
const ZERO_SPAN = '0'.repeat(16);

/** The context a `traceparent` value carries, or null when it is not a valid one (the spec says: start a new trace). */
export function parseTraceparent(value: string | null | undefined): TraceContext | null {
  if (typeof value !== 'string' || value.length > 512) return null;
  const m = TRACEPARENT.exec(value.trim().toLowerCase());
  if (!m) return null;
  const [, version, traceId, spanId, flags, rest] = m;
  // Version ff is invalid; version 00 has exactly four fields; later versions may append more.
  if (version === 'ff' || (version === '00' && rest !== undefined)) return null;
  if (traceId === ZERO_TRACE || spanId === ZERO_SPAN) return null;
  return { traceId: traceId!, spanId: spanId!, flags: Number.parseInt(flags!, 16) };
}

export function formatTraceparent(c: TraceContext): string {
  return `00-${c.traceId}-${c.spanId}-${c.flags.toString(16).padStart(2, '0')}`;
}

/**
 * Random bytes for ids, drawn from a pool refilled 4 KiB at a time: a span id is made for every
 * provider call, and a call to the crypto module for each one is a measurable share of the engine's CPU.
 */
const pool = Buffer.alloc(4096);
let poolOffset = pool.length;

function randomHex(bytes: number): string {
  if (poolOffset + bytes > pool.length) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  const hex = pool.toString('hex', poolOffset, poolOffset + bytes);
  poolOffset += bytes;
  return hex;
}

export function newSpanId(): string {
  return randomHex(8);
}

/** A new span in the parent's trace, or the root span of a new (sampled) trace. */
export function childContext(parent: TraceContext | null): TraceContext {
  return parent ? { traceId: parent.traceId, spanId: newSpanId(), flags: parent.flags } : { traceId: randomHex(16), spanId: newSpanId(), flags: 1 };
}

/** The trace id of a stored `traceparent` (null for threads created before trace ids existed). */
export function traceIdOf(traceparent: string | null | undefined): string | null {
  return traceparent == null ? null : traceparent.slice(3, 35);
}
