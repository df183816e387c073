// How old the oldest message a shard has not read (or not committed) yet is: the backlog age of a
// source journal, beside its lag in bytes.
//
// A shard's read-through offset of a journal is where its next unread message begins. Gazette
// messages carry a v1 UUID whose clock is the producer's wall time at publishing, so the message
// at that offset says when it was published. Gazette's Go applications keep the UUID in a JSON
// field named `UUID` (no json tag; encoding/json matches keys case-insensitively), which is what
// is read here from an NDJSON line; Gazette's CSV framing keeps it in the first column (as
// `gazctl attach-uuids` writes it). When the message has no usable UUID (another framing, a line
// without one, a zero clock), the fragment holding the offset gives a bound instead: its content
// was written before the fragment was persisted, so the message is at least as old as the
// fragment's store modification time. A fragment still being written (not persisted) gives none.
import type { Fragment } from '../protocol/gen/broker/protocol.js';
import { goJsonField, parseGoUUID } from '../message/json.js';
import { clockToUnixNanos, getClock, hasZeroClock } from '../message/uuid.js';
import type { JournalClient } from './journal-client.js';
import type { CallOptions } from './rpc.js';

/** When the oldest unread message of a journal was published, as far as can be told. */
export type OldestUnread =
  /** Nothing is unread: the shard has read through the write head. */
  | { kind: 'none' }
  /** From the UUID clock of the message at the read-through offset (unix ms). */
  | { kind: 'published'; atMs: number }
  /** No UUID: the message is in a fragment persisted at `atMs` (unix ms), so it is at least that old. */
  | { kind: 'persisted-by'; atMs: number }
  /** Neither (a fragment not yet persisted, content that is gone, a failed read). */
  | { kind: 'unknown'; why: string };

/** Longest message prefix read looking for the end of the first line. */
const MAX_LINE_BYTES = 1 << 20;

/**
 * The publish time of the message at `offset` of `journal` (the shard's read-through offset),
 * from one non-blocking read of at most one line (proxied by the broker: no store credentials).
 */
export async function oldestUnread(
  journals: Pick<JournalClient, 'read'>,
  journal: string,
  offset: bigint,
  writeHead: bigint,
  opts: Pick<CallOptions, 'signal'> = {},
): Promise<OldestUnread> {
  if (offset >= writeHead) return { kind: 'none' };
  const ac = new AbortController();
  const signal = opts.signal ? AbortSignal.any([opts.signal, ac.signal]) : ac.signal;
  const r = journals.read({ journal, offset, block: false }, { directReads: false, signal });
  let fragment: Fragment | undefined;
  const parts: Buffer[] = [];
  let size = 0;
  let line: Buffer | undefined;
  try {
    for await (const chunk of r) {
      if (chunk.fragment && fragment === undefined) fragment = chunk.fragment;
      if (chunk.content.length === 0) continue;
      const c = Buffer.from(chunk.content); // the reader may reuse its buffer
      const nl = c.indexOf(0x0a);
      if (nl >= 0) {
        parts.push(c.subarray(0, nl));
        line = Buffer.concat(parts);
        break;
      }
      parts.push(c);
      size += c.length;
      if (size >= MAX_LINE_BYTES) break;
    }
  } catch (err) {
    return { kind: 'unknown', why: (err as Error).message };
  } finally {
    ac.abort();
  }
  fragment ??= r.fragment;
  const published = line === undefined ? undefined : publishedAtMs(line);
  if (published !== undefined) return { kind: 'published', atMs: published };
  const mod = Number(fragment?.mod_time ?? 0n);
  if (mod > 0) return { kind: 'persisted-by', atMs: mod * 1000 };
  return { kind: 'unknown', why: line === undefined ? 'no complete message read' : 'the message has no UUID and its fragment is not persisted yet' };
}

/**
 * The publish time (unix ms) of a message line, if it carries a v1 UUID with a clock: the `UUID`
 * field of an NDJSON document, else the first field of a CSV record.
 */
export function publishedAtMs(line: Buffer | string): number | undefined {
  const text = (typeof line === 'string' ? line : line.toString('utf8')).replace(/\r$/, '');
  let v: unknown;
  try {
    const doc: unknown = JSON.parse(text);
    if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) return undefined;
    v = goJsonField(doc as Record<string, unknown>, 'UUID');
  } catch {
    // Not JSON: a CSV record's first field (quoted or not).
    v = text.startsWith('"') ? text.slice(1, Math.max(1, text.indexOf('"', 1))) : text.split(',', 1)[0];
  }
  if (typeof v !== 'string') return undefined;
  let uuid: Uint8Array;
  try {
    uuid = parseGoUUID(v);
  } catch {
    return undefined;
  }
  // Only a time-based (version 1) UUID has a clock.
  if (uuid[6]! >> 4 !== 1 || hasZeroClock(uuid)) return undefined;
  return Number(clockToUnixNanos(getClock(uuid)) / 1_000_000n);
}

/**
 * The age the output shows for `o` at `nowMs`: a Go duration in whole seconds ("1m30s"), "0s" when
 * nothing is unread, ">=<age>" for a bound from a fragment, "-" when unknown. A publish time ahead
 * of this clock (clock skew) reads 0s.
 */
export function formatBacklogAge(o: OldestUnread, nowMs: number, fmt: (ns: bigint) => string): string {
  switch (o.kind) {
    case 'none':
      return '0s';
    case 'unknown':
      return '-';
    case 'published':
    case 'persisted-by': {
      const s = Math.max(0, Math.floor((nowMs - o.atMs) / 1000));
      return (o.kind === 'persisted-by' ? '>=' : '') + fmt(BigInt(s) * 1_000_000_000n);
    }
  }
}
