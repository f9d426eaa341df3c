/**
 * Crash points: where crash tests make the daemon die (SIGKILL) to prove what survives. Production code
 * only ever calls `crashAt(point)`; what that does is wired at the composition root from the test-only
 * seam (daemon/test-hooks.ts), and in the shipped bundle it does nothing.
 */
export type CrashPoint = 'after_claim' | 'between_start_slices' | 'during_call' | 'after_response' | 'in_mutation' | 'after_schedule_claim';

export type CrashAt = (point: CrashPoint) => void;

export const neverCrash: CrashAt = () => {};
