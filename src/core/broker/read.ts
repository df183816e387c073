// The Read RPC at a route member: resolve the offset against the journal's fragment index, send
// a metadata response for each fragment, then its content in chunks, and move on to the next
// fragment; block for more content when asked to, else end with OFFSET_NOT_YET_AVAILABLE.
//
// Content chunks are encoded by hand (read-wire.ts): spool content is read from the file straight
// into the message buffer, and grpc-js copies that once more into its frame, which is all the
// copying a byte of content sees here; the message buffers are recycled once sent. Chunks are
// written without a promise each: the loop keeps writing while the call takes more, and waits for
// 'drain' only when write() says so.

import type { ServerWritableStream } from '@grpc/grpc-js';
import type { Readable } from 'node:stream';
import { decodeFragmentStream } from '../../lib/codecs/index.js';
import { fragmentContentPath } from '../../lib/protocol/fragment.js';
import { ReadResponse, Status, type Fragment, type Header, type ReadRequest } from '../../lib/protocol/gen/broker/protocol.js';
import { readLocalInto, SpoolFileClosedError, type LocalFragment } from '../fragment/spool.js';
import type { Broker } from './broker.js';
import type { Replica } from './replica.js';
import { encodeContent, encodeContentInto, recycleContent, type ReadWireMessage } from './read-wire.js';

/**
 * Largest content chunk of one response, as upstream's: just under 32 KiB, so that a whole
 * encoded response stays within 32 KiB.
 */
export const READ_CHUNK = 32 * 1024 - 32;
const SIGNED_URL_TTL_MS = 60_000;

type Call = ServerWritableStream<ReadRequest, ReadWireMessage>;

/** Resolves once `call` drains, or once it is finished with (cancelled, closed, errored). */
function drained(call: Call, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      call.off('drain', done);
      call.off('close', done);
      call.off('error', done);
      signal.removeEventListener('abort', done);
      resolve();
    };
    call.on('drain', done);
    call.on('close', done);
    call.on('error', done);
    signal.addEventListener('abort', done);
  });
}

function write(call: Call, r: Partial<ReadResponse>, signal: AbortSignal): Promise<void> | undefined {
  return call.write(ReadResponse.fromPartial(r)) ? undefined : drained(call, signal);
}

/**
 * The uncompressed content of a persisted fragment, from `offset` on. (Exported for tests.) A
 * reader that goes away mid-fragment closes the stored stream with the decompressor, and a
 * failure reading the stored bytes fails the read (decodeFragmentStream).
 */
export async function openStored(b: Pick<Broker, 'openStore'>, f: Fragment, offset: bigint): Promise<AsyncIterable<Buffer>> {
  const store = b.openStore(f.backing_store);
  const raw: Readable = await store.open(fragmentContentPath(f));
  const plain: AsyncIterable<Buffer> = decodeFragmentStream(raw, f.compression_codec, false);
  let skip = Number(offset - f.begin);
  return (async function* () {
    for await (const chunk of plain) {
      if (skip >= chunk.length) {
        skip -= chunk.length;
        continue;
      }
      yield skip > 0 ? chunk.subarray(skip) : chunk;
      skip = 0;
    }
  })();
}

export async function serveRead(b: Broker, call: ServerWritableStream<ReadRequest, ReadResponse>, replica: Replica, header: Header): Promise<void> {
  const req = call.request;
  const wire = call as unknown as Call; // the Read serializer also takes encoded chunks (server.ts)
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
  const endOffset = req.end_offset;

  try {
    while (!ac.signal.aborted) {
      if (endOffset > 0n && offset >= endOffset) break;
      let q = await replica.index.query({ offset, block: false, beginModTime: req.begin_mod_time });
      if ((q.status !== Status.OK || q.offset > offset) && offset >= 0n && offset < replica.spool.begin) {
        await replica.refreshSoon(); // a late replica may not have listed the stores yet
        q = await replica.index.query({ offset, block: false, beginModTime: req.begin_mod_time });
      }
      if (q.status !== Status.OK && req.block) q = await replica.index.query({ offset, block: true, beginModTime: req.begin_mod_time, signal: ac.signal });
      if (q.status !== Status.OK) {
        await write(wire, { status: Status.OFFSET_NOT_YET_AVAILABLE, header: hdr(), offset: q.offset, write_head: q.writeHead }, ac.signal);
        break;
      }
      offset = q.offset;
      const f = q.fragment;
      const url = !q.local && f.mod_time !== 0n ? ((await replica.index.signedUrl(f, SIGNED_URL_TTL_MS).catch(() => undefined)) ?? '') : '';
      await write(wire, { status: Status.OK, header: hdr(), offset, write_head: q.writeHead, fragment: f, fragment_url: url }, ac.signal);
      if (req.metadata_only) break;
      // Not held here and the client may not be proxied: it reads the fragment from its URL.
      if (!q.local && req.do_not_proxy && url) break;
      const stop = endOffset > 0n && endOffset < f.end ? endOffset : f.end;
      const from = offset;
      try {
        if (q.local) offset = await streamLocal(wire, q.local, offset, stop, ac.signal);
        else {
          for await (const chunk of await openStored(b, f, offset)) {
            if (ac.signal.aborted || offset >= stop) break;
            let c = chunk.subarray(0, Number(stop - offset));
            while (c.length > 0 && !ac.signal.aborted) {
              const part = c.subarray(0, READ_CHUNK);
              const msg = encodeContent(offset, part);
              const more = wire.write(msg, () => recycleContent(msg));
              offset += BigInt(part.length);
              c = c.subarray(part.length);
              if (!more) await drained(wire, ac.signal);
            }
          }
        }
      } finally {
        b.metrics.readBytes.inc(Number(offset - from));
      }
      if (offset === q.offset && offset < stop) {
        // Nothing could be read (a spool file closed under us): let the index catch up.
        await new Promise((r) => setTimeout(r, 20));
      }
    }
  } catch (e) {
    if (!ac.signal.aborted) throw e;
  }
  call.end();
}

/** Stream committed spool content of `lf` in [offset, stop); returns the offset reached. */
async function streamLocal(call: Call, lf: LocalFragment, offset: bigint, stop: bigint, signal: AbortSignal): Promise<bigint> {
  let pos = offset;
  let got = 0;
  const fill = (dst: Buffer, at: number, n: number) => (got = readLocalInto(lf, pos, dst, at, n));
  while (pos < stop && !signal.aborted) {
    const n = stop - pos < BigInt(READ_CHUNK) ? Number(stop - pos) : READ_CHUNK;
    let msg: Buffer | undefined;
    try {
      msg = encodeContentInto(pos, n, fill);
    } catch (e) {
      // The spool was persisted and its file closed meanwhile: query again (now from the store).
      if (e instanceof SpoolFileClosedError) return pos;
      throw e;
    }
    if (!msg) break;
    const sent = msg;
    const more = call.write(msg, () => recycleContent(sent));
    pos += BigInt(got);
    if (!more) await drained(call, signal);
  }
  return pos;
}
