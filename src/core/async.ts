/**
 * Array helpers for async callbacks (storage reads), run one after another: a statement at a time on
 * the handle, in the array's order, as the synchronous `filter`/`flatMap` did.
 */
export async function filterAsync<T>(items: readonly T[], keep: (item: T) => Promise<boolean>): Promise<T[]> {
  const kept: T[] = [];
  for (const item of items) if (await keep(item)) kept.push(item);
  return kept;
}

export async function flatMapAsync<T, U>(items: readonly T[], map: (item: T) => Promise<readonly U[]>): Promise<U[]> {
  const out: U[] = [];
  for (const item of items) out.push(...(await map(item)));
  return out;
}
