// How far a shard's consumption trails its journals: for each journal the shard has read
// through (its Stat's read_through offsets), the journal's write head minus that offset.
import { compareStrings } from '../protocol/labels.js';
import type { JournalClient } from './journal-client.js';
import type { ShardClient } from './shard-client.js';
import type { CallOptions } from './rpc.js';
import { oldestUnread, type OldestUnread } from './backlog-age.js';

export interface JournalLag {
  /** As the shard reports it (it may carry a `;suffix`). */
  journal: string;
  readThrough: bigint;
  writeHead: bigint;
  /** writeHead − readThrough. */
  lag: bigint;
  /** When the oldest unread message was published (with `age`; see backlog-age.ts). */
  oldest?: OldestUnread;
}

/**
 * The lag of `shard` per journal, sorted by journal name: one Stat at the shard's primary, then
 * one non-blocking read from the write head (offset -1) per journal, which answers with the
 * head and no content. Read failures other than "no content yet" are thrown. With `age`, one
 * more read per journal that has a lag: of the message at the read-through offset, for its
 * publish time (oldestUnread).
 */
export async function shardLag(
  shards: Pick<ShardClient, 'stat'>,
  journals: Pick<JournalClient, 'read'>,
  shard: string,
  opts: CallOptions & { age?: boolean } = {},
): Promise<JournalLag[]> {
  const stat = await shards.stat(shard, opts);
  const entries = Object.entries(stat.read_through).sort(([a], [b]) => compareStrings(a, b));
  const out: JournalLag[] = [];
  for (const [journal, readThrough] of entries) {
    const r = journals.read({ journal, offset: -1n, block: false }, { directReads: false, signal: opts.signal });
    for await (const _ of r) {
      // nothing is read at the write head of a non-blocking read: it ends with the head known
    }
    const lag: JournalLag = { journal, readThrough, writeHead: r.writeHead, lag: r.writeHead - readThrough };
    if (opts.age) lag.oldest = await oldestUnread(journals, journal, readThrough, r.writeHead, { signal: opts.signal });
    out.push(lag);
  }
  return out;
}
