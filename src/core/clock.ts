/**
 * Time is a parameter: the engine, the scheduler, the services and every query that asks "now" take it
 * from an injected clock, so tests drive time with a fake one. This is the only place that reads the
 * wall clock for them.
 */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };
