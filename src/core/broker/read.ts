// The Read RPC at a route member: resolve the offset against the journal's index, send a
// metadata response for each fragment, then its content in chunks, and move on to the next
// fragment; block for more content when asked to, else end with OFFSET_NOT_YET_AVAILABLE.

import type { ServerWritableStream } from '@grpc/grpc-js';
import { ReadResponse, Status, type Header, type ReadRequest } from '../../lib/protocol/gen/broker/protocol.js';
import type { Broker } from './broker.js';
import type { IndexedFragment, Replica } from './replica.js';

/** Largest content chunk of one response, as upstream's. */
export const READ_CHUNK = 32 * 1024 - 32;
const SIGNED_URL_TTL_MS = 60_000;
/** A persisted fragment older than this may be jumped to when the offset has no fragment. */
const JUMP_AGE_SECONDS = 6n * 3600n;

type Call = ServerWritableStream<ReadRequest, ReadResponse>;

function write(call: Call, r: Partial<ReadResponse>): Promise<void> {
  return new Promise((resolve) => {
    if (call.write(ReadResponse.fromPartial(r))) resolve();
    else call.once('drain', () => resolve());
  });
}

/** Where `offset` reads from: a fragment covering it, or a later one it may jump to. */
function locate(replica: Replica, offset: bigint, beginModTime: bigint): IndexedFragment | undefined {
  for (;;) {
    const q = replica.query(offset);
    if (!q) return undefined;
    const f = q.entry.fragment;
    if (f.begin <= offset) {
      if (f.mod_time !== 0n && beginModTime > 0n && f.mod_time < beginModTime) {
        offset = f.end; // too old for the reader: skip it
        continue;
      }
      return q.entry;
    }
    // No fragment holds the offset; a later persisted one is a jump target when it is the very
    // first of the index or old enough that the gap will not be filled any more. Spools and
    // recent fragments are only jumped to... when they start the index as well.
    const all = replica.listFragments();
    const isFirst = all.length > 0 && all[0]!.fragment.begin === f.begin;
    const old = f.mod_time !== 0n && f.mod_time < BigInt(Math.floor(Date.now() / 1000)) - JUMP_AGE_SECONDS;
    if (isFirst || old) {
      if (f.mod_time !== 0n && beginModTime > 0n && f.mod_time < beginModTime) {
        offset = f.end;
        continue;
      }
      return q.entry;
    }
    return undefined;
  }
}

export async function serveRead(b: Broker, call: Call, replica: Replica, header: Header): Promise<void> {
  const req = call.request;
  await replica.loaded;
  b.metrics.reads.inc();
  const ac = new AbortController();
  call.on('cancelled', () => ac.abort());
  call.on('close', () => ac.abort());
  let offset = req.offset;
  let first = true;
  const hdr = () => {
    if (!first) return undefined;
    first = false;
    return header;
  };
  if (offset < 0n) offset = replica.indexEnd;
  const endOffset = req.end_offset;

  while (!ac.signal.aborted) {
    if (endOffset > 0n && offset >= endOffset) break;
    let e = locate(replica, offset, req.begin_mod_time);
    if ((!e || e.fragment.begin > offset) && offset < replica.spool.fragment.begin) {
      await replica.refreshSoon();
      e = locate(replica, offset, req.begin_mod_time);
    }
    if (!e) {
      if (!req.block) {
        await write(call, { status: Status.OFFSET_NOT_YET_AVAILABLE, header: hdr(), offset, write_head: replica.indexEnd });
        break;
      }
      await replica.waitForChange(ac.signal, 5000);
      continue;
    }
    const f = e.fragment;
    if (f.begin > offset) offset = f.begin;
    const url = f.mod_time !== 0n ? await replica.signedUrl(f, SIGNED_URL_TTL_MS).catch(() => '') : '';
    const writeHead = replica.indexEnd > f.end ? replica.indexEnd : f.end;
    await write(call, { status: Status.OK, header: hdr(), offset, write_head: writeHead, fragment: f, fragment_url: url });
    if (req.metadata_only) break;
    if (req.do_not_proxy && !e.content && f.mod_time !== 0n && replica.spool.fragment.begin !== f.begin) {
      // Not held locally: the client reads the fragment from its URL itself.
      break;
    }
    const stop = endOffset > 0n && endOffset < f.end ? endOffset : f.end;
    const spool = replica.spool;
    const isSpool = spool.fragment.begin === f.begin && f.mod_time === 0n && !e.content;
    const content = isSpool ? undefined : await replica.content(e);
    while (offset < stop && !ac.signal.aborted) {
      const n = Number(stop - offset < BigInt(READ_CHUNK) ? stop - offset : BigInt(READ_CHUNK));
      const chunk = isSpool ? spool.read(offset, n) : content!.subarray(Number(offset - f.begin), Number(offset - f.begin) + n);
      if (chunk.length === 0) break;
      await write(call, { offset, content: Buffer.from(chunk) });
      b.metrics.readBytes.inc(chunk.length);
      offset += BigInt(chunk.length);
    }
  }
  call.end();
}
