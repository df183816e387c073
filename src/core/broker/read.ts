// The Read RPC at a route member: resolve the offset against the journal's fragment index, send
// a metadata response for each fragment, then its content in chunks, and move on to the next
// fragment; block for more content when asked to, else end with OFFSET_NOT_YET_AVAILABLE.

import type { ServerWritableStream } from '@grpc/grpc-js';
import type { Readable } from 'node:stream';
import { decompressor } from '../../lib/codecs/index.js';
import { fragmentContentPath } from '../../lib/protocol/fragment.js';
import { ReadResponse, Status, type Fragment, type Header, type ReadRequest } from '../../lib/protocol/gen/broker/protocol.js';
import { readLocal, SpoolFileClosedError, type LocalFragment } from '../fragment/spool.js';
import type { Broker } from './broker.js';
import type { Replica } from './replica.js';

/** Largest content chunk of one response, as upstream's. */
export const READ_CHUNK = 32 * 1024 - 32;
const SIGNED_URL_TTL_MS = 60_000;

type Call = ServerWritableStream<ReadRequest, ReadResponse>;

function write(call: Call, r: Partial<ReadResponse>): Promise<void> {
  return new Promise((resolve) => {
    if (call.write(ReadResponse.fromPartial(r))) resolve();
    else call.once('drain', () => resolve());
  });
}

/** The uncompressed content of a persisted fragment, from `offset` on. */
async function openStored(b: Broker, f: Fragment, offset: bigint): Promise<AsyncIterable<Buffer>> {
  const store = b.openStore(f.backing_store);
  const raw: Readable = await store.open(fragmentContentPath(f));
  const d = decompressor(f.compression_codec);
  const plain: AsyncIterable<Buffer> = d ? (raw.pipe(d as NodeJS.WritableStream & NodeJS.ReadableStream) as unknown as AsyncIterable<Buffer>) : raw;
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
  const endOffset = req.end_offset;
  const send = async (offset: bigint, content: Buffer) => {
    await write(call, { offset, content: Buffer.from(content) });
    b.metrics.readBytes.inc(content.length);
  };

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
        await write(call, { status: Status.OFFSET_NOT_YET_AVAILABLE, header: hdr(), offset: q.offset, write_head: q.writeHead });
        break;
      }
      offset = q.offset;
      const f = q.fragment;
      const url = !q.local && f.mod_time !== 0n ? ((await replica.index.signedUrl(f, SIGNED_URL_TTL_MS).catch(() => undefined)) ?? '') : '';
      await write(call, { status: Status.OK, header: hdr(), offset, write_head: q.writeHead, fragment: f, fragment_url: url });
      if (req.metadata_only) break;
      // Not held here and the client may not be proxied: it reads the fragment from its URL.
      if (!q.local && req.do_not_proxy && url) break;
      const stop = endOffset > 0n && endOffset < f.end ? endOffset : f.end;
      if (q.local) offset = await streamLocal(q.local, offset, stop, send, ac.signal);
      else {
        for await (const chunk of await openStored(b, f, offset)) {
          if (ac.signal.aborted || offset >= stop) break;
          let c = chunk.subarray(0, Number(stop - offset));
          while (c.length > 0) {
            const part = c.subarray(0, READ_CHUNK);
            await send(offset, part);
            offset += BigInt(part.length);
            c = c.subarray(part.length);
          }
        }
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
async function streamLocal(lf: LocalFragment, offset: bigint, stop: bigint, send: (o: bigint, c: Buffer) => Promise<void>, signal: AbortSignal): Promise<bigint> {
  while (offset < stop && !signal.aborted) {
    const n = Number(stop - offset < BigInt(READ_CHUNK) ? stop - offset : BigInt(READ_CHUNK));
    let chunk: Buffer;
    try {
      chunk = readLocal(lf, offset, n);
    } catch (e) {
      // The spool was persisted and its file closed meanwhile: query again (now from the store).
      if (e instanceof SpoolFileClosedError) return offset;
      throw e;
    }
    if (chunk.length === 0) break;
    await send(offset, chunk);
    offset += BigInt(chunk.length);
  }
  return offset;
}
