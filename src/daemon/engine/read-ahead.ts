/**
 * Operations' functions are synchronous and pure (`prompt`, `children`, `apply` — the public operation
 * API), but storage is async. They read through `ReadAhead`: a read of a value already loaded returns
 * it; a read of one not loaded yet records what to load and stops the function (by throwing, or by
 * poisoning its result if the function caught the throw); `runWithReads` then loads it and runs the
 * function again. Pure functions make the re-run safe; each distinct read costs one re-run, and an
 * operation reads a few documents at most.
 */
import { NOT_LOADED_YET } from '../../core/errors.js';

const MAX_ROUNDS = 64;

export class ReadAhead {
  private readonly values = new Map<string, unknown>();
  private missing: { key: string; load: () => Promise<unknown> } | null = null;

  /** The value stored under `key`, loaded by `load` on a previous round. */
  read<T>(key: string, load: () => Promise<T>): T {
    if (this.values.has(key)) return this.values.get(key) as T;
    this.missing ??= { key, load };
    throw NOT_LOADED_YET;
  }

  /** Whether `key` is loaded (checked before `preload`, which then costs no await). */
  has(key: string): boolean {
    return this.values.has(key);
  }

  /** Stores `value` under `key` before a round reads it (a value the caller knows, or guesses, the function will read). */
  put(key: string, value: unknown): void {
    this.values.set(key, value);
  }

  /** How many values are loaded. */
  get size(): number {
    return this.values.size;
  }

  /** Whether the last round stopped at a read not loaded yet. */
  get missed(): boolean {
    return this.missing !== null;
  }

  /** The keys loaded so far. */
  loadedKeys(): string[] {
    return [...this.values.keys()];
  }

  /** @internal runWithReads: the read that stopped this round, loaded; false when none did. */
  async loadMissing(): Promise<boolean> {
    const m = this.missing;
    if (!m) return false;
    this.missing = null;
    this.values.set(m.key, await m.load());
    return true;
  }
}

/** Runs `fn` until it completes with every value it reads loaded (some may be preloaded in `reads`); returns its result. */
export function runWithReads<T>(fn: (reads: ReadAhead) => T, reads = new ReadAhead()): Promise<T> {
  // The first round without an await: most runs miss nothing (what they read was loaded ahead), and an
  // async frame per run showed in the engine's profile.
  try {
    const result = fn(reads);
    if (!reads.missed) return Promise.resolve(result);
  } catch (e) {
    if (!reads.missed) return Promise.reject(e);
  }
  return moreRounds(fn, reads);
}

/** The rounds after a first one that missed a read. */
async function moreRounds<T>(fn: (reads: ReadAhead) => T, reads: ReadAhead): Promise<T> {
  await reads.loadMissing();
  for (let round = 1; round < MAX_ROUNDS; round++) {
    let result: T | undefined;
    let error: unknown;
    let threw = false;
    try {
      result = fn(reads);
    } catch (e) {
      threw = true;
      error = e;
    }
    // A read missed (even if the function swallowed the throw): load it and run again. Checked before
    // awaiting: most rounds miss nothing.
    if (reads.missed && (await reads.loadMissing())) continue;
    if (threw) throw error;
    return result as T;
  }
  throw new Error(`an operation function read more than ${MAX_ROUNDS} distinct values`);
}
