/** The canary's names (see canary-operation.ts), apart so configuration can route its model without loading it. */
export const CANARY_OPERATION = 'combine_canary';
/** The canary's logical model: routed to the built-in provider (a name with ':' is never a user's). */
export const CANARY_MODEL = 'combine:canary';
/** What the canary's requests name as their model. */
export const CANARY_PROVIDER_MODEL = 'combine-canary';
export const CANARY_ENDPOINT = 'builtin:canary';
