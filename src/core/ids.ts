/**
 * Row ids: UUID version 7 (RFC 9562), i.e. a 48-bit millisecond timestamp followed by random bits.
 * Why not v4: ids are primary keys, and the rows of one command (a thread, its work item, later its
 * mutation) are written together and updated together. Random keys scatter them over the whole B-tree,
 * so every commit rewrote one page per row touched; time-ordered keys keep rows created together on
 * the same pages, which one group commit then writes once.
 *
 * Within one millisecond the 12-bit `rand_a` field counts up from a random start (RFC 9562 §6.2,
 * method 1), so ids made by this process are strictly increasing.
 */
import { randomFillSync } from 'node:crypto';

let lastMs = -1;
let counter = 0;

// Random bytes are drawn from the system's CSPRNG 4 KiB at a time: one call per id (two at each new
// millisecond) showed in the engine's CPU profile, about five ids per item.
const pool = Buffer.allocUnsafe(4096);
let poolAt = pool.length;
const id = Buffer.allocUnsafe(16);

/** Copies `n` fresh random bytes into `into` at `at`. */
function randomInto(into: Buffer, at: number, n: number): void {
  if (poolAt + n > pool.length) {
    randomFillSync(pool);
    poolAt = 0;
  }
  pool.copy(into, at, poolAt, poolAt + n);
  poolAt += n;
}

/** A new UUIDv7 for time `now` (ms since the epoch, from the caller's clock). Ids from one process increase strictly. */
export function newId(now: number): string {
  if (now > lastMs) {
    lastMs = now;
    randomInto(id, 0, 2);
    counter = id.readUInt16BE(0) & 0x7ff; // leave headroom before the 12-bit field overflows
  } else if (++counter > 0xfff) {
    // More than ~2k ids in one millisecond: borrow the next millisecond to stay ordered.
    lastMs++;
    counter = 0;
  }
  randomInto(id, 8, 8);
  id.writeUIntBE(lastMs, 0, 6);
  id[6] = 0x70 | (counter >> 8);
  id[7] = counter & 0xff;
  id[8] = 0x80 | (id[8]! & 0x3f);
  const hex = id.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/**
 * Ascending order of ids (or keys made of ids) by code unit: the one order in which transactions that
 * lock several rows take them, so that two of them never wait for each other crosswise.
 */
export function compareIds(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
