/**
 * Every error type of combine, in one module. Each names what went wrong in words a user can act on;
 * where an error crosses a boundary it is classified once, there:
 *
 *   the router and the HTTP API   CommandError → exit code / HTTP status (router.ts, http/problem.ts)
 *   the engine                    provider and storage failures → an error code (engine/classify.ts)
 *   the daemon's start            ConfigError, OperationDefinitionError → DaemonStartError (main.ts)
 *   the CLI                       anything → CliError and its exit code (cli/client.ts)
 *
 * The codes the engine records (PROVIDER_TIMEOUT, …) are data, not classes: see domain/errors.ts.
 */

/**
 * A refused command: `kind` decides the CLI's exit code (bad input → 2, conflict with state → 1) and the
 * HTTP status. `fields`: for bad input, each field named with what is wrong with it (HTTP lists them in
 * `errors`).
 */
export class CommandError extends Error {
  constructor(
    readonly kind: 'BAD_REQUEST' | 'NOT_FOUND' | 'CONFLICT',
    message: string,
    readonly code?: string,
    readonly fields?: readonly { field: string; message: string }[],
  ) {
    super(message);
    this.name = 'CommandError';
  }
}

/** A guarded state change matched no row: someone else changed the row first. */
export class StaleStateError extends Error {
  constructor(what: string) {
    super(`stale state: ${what}`);
    this.name = 'StaleStateError';
  }
}

/**
 * A step of a shared write closure (engine/shared-writes.ts) met a stale guard. The closure is not run
 * again as a whole (its other steps would only wait for the same step to fail again): each of its steps
 * runs again alone, where the stale one fails on its own. Never reaches a caller.
 */
export class SharedStepStaleError extends Error {
  constructor(readonly stale: StaleStateError) {
    super(stale.message);
    this.name = 'SharedStepStaleError';
  }
}

/** A status change the transition tables (domain/states.ts) do not allow: a bug, never a silent write. */
export class IllegalTransitionError extends Error {
  constructor(
    readonly entity: 'thread' | 'work_item' | 'charge' | 'schedule' | 'schedule_run',
    readonly from: string,
    readonly to: string,
  ) {
    super(`illegal ${entity} transition ${from} → ${to}`);
    this.name = 'IllegalTransitionError';
  }
}

/**
 * The database's ledger append (migrations/pg/0009 `llm_ledger_append`) answered with a different number of
 * linked rows than the entries it was given: the function and this process disagree, a bug, never a result
 * to guess from. On the COMMIT's query the entries are already committed when this is found (the writer
 * then passes it to the caller as is, never running the closure again), so `ledger verify` is what tells
 * what the chain holds. Thrown there before the writer publishes the write's events (db/pg/writer.ts), so
 * none of that committed write's events reaches a follow stream or another daemon; they see its rows
 * only when they next read them.
 */
export class LedgerLinkMismatchError extends Error {
  constructor(
    readonly entries: number,
    readonly linked: number,
  ) {
    super(`the ledger append linked ${linked} rows for ${entries} entries`);
    this.name = 'LedgerLinkMismatchError';
  }
}

/** A write that could not be committed because storage failed, after the writer's bounded retries. */
export class InfraError extends Error {
  constructor(override readonly cause: unknown) {
    super(`storage failure: ${(cause as Error)?.message ?? String(cause)}`);
    this.name = 'InfraError';
  }
}

/**
 * Storage refused a value one write holds (a data exception: a text with U+0000, a number out of its
 * column's range, a value too long for its column or index). The write fails the same way every time it
 * runs, so it is that write's own permanent failure, never storage trouble: nothing of it was applied,
 * and the engine ends the one item it was for (engine/failures.ts `failRefusedWrite`). `sqlstate`: the
 * Postgres code (or the SQLite one) that said so. The message never holds the refused value's NUL.
 * `cause`: the server's error as it came (its detail, table, column and constraint, for the log).
 */
export class RefusedValueError extends Error {
  constructor(
    readonly sqlstate: string,
    message: string,
    cause?: unknown,
  ) {
    super(`storage refused a value: ${message} (${sqlstate})`, { cause });
    this.name = 'RefusedValueError';
  }
}

/** config.json or an environment variable is invalid; the message names the field. */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

/** The daemon cannot start; `exitCode` is what `combine daemon start|run` exits with (2: bad input, 1: otherwise). */
export class DaemonStartError extends Error {
  constructor(
    message: string,
    readonly exitCode: number,
  ) {
    super(message);
    this.name = 'DaemonStartError';
  }
}

/** No API key is configured for a provider that needs one. */
export class MissingApiKeyError extends Error {
  constructor() {
    super('no OPENAI_API_KEY is set (set it, point OPENAI_BASE_URL at a local server, or try `combine demo`)');
    this.name = 'MissingApiKeyError';
  }
}

/** A 2xx answer larger than `provider.max_answer_bytes`: refused while it was read, never stored. */
export class AnswerTooLargeError extends Error {
  constructor(limit: number, declared: number | null) {
    super(
      `answer too large: ${declared !== null ? `the provider announced ${declared} bytes` : 'the provider sent more'}, over the ${limit}-byte limit (provider.max_answer_bytes); it was not read or stored`,
    );
    this.name = 'AnswerTooLargeError';
  }
}

/** An operation module is not a valid definition: names the module's file and the field. */
export class OperationDefinitionError extends Error {
  constructor(
    readonly source: string,
    readonly field: string,
    readonly reason: string,
  ) {
    super(`${source}: ${field}: ${reason}`);
    this.name = 'OperationDefinitionError';
  }
}

/**
 * Thrown through an operation's function by a read whose value is not loaded yet (the daemon's
 * read-ahead, daemon/engine/read-ahead.ts, runs the function again once it is): not a failure of the
 * function, so code that wraps a function's throws passes it on unchanged. One shared object, not an
 * Error: no stack is captured on the hot path (it showed in the engine's profile).
 */
export const NOT_LOADED_YET = Object.freeze({ reason: 'read ahead: value not loaded yet (the function is run again once it is)' });

/** A definition's function threw or returned something unusable. `notFound`: it said the input names nothing that exists. */
export class OperationCallError extends Error {
  constructor(
    readonly operation: string,
    readonly fn: string,
    readonly reason: string,
    readonly notFound = false,
  ) {
    super(`${operation}.${fn}: ${reason}`);
    this.name = 'OperationCallError';
  }
}

/** A thread whose operation is not loaded in this daemon (its module was removed or renamed). */
export class UnknownOperationError extends Error {
  constructor(readonly kind: string) {
    super(`no loaded operation runs threads of kind "${kind}" (its module is missing from COMBINE_HOME/operations or config operations.modules)`);
    this.name = 'UnknownOperationError';
  }
}

export interface FieldError {
  field: string;
  message: string;
}

/** An HTTP API error answered with its own status and code (http/problem.ts renders it, RFC 9457). */
export class HttpProblem extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly errors?: FieldError[],
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'HttpProblem';
  }
}

/** An error that ends a CLI command with a message on stderr and an exit code (cli/output.ts's EXIT). */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: 0 | 1 | 2 | 3,
  ) {
    super(message);
    this.name = 'CliError';
  }
}
