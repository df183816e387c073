// Verifying stored fragments: read a persisted fragment object from its store, decompress it, and
// check that its content is what its name says: exactly `end - begin` bytes whose SHA-1 is the
// sum in the name. No broker does this on read, so a flipped bit in a store goes unnoticed until
// a reader trips over corrupt compression, or never (for uncompressed fragments).
import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import { fragmentContentPath, sumToHex } from '../protocol/fragment.js';
import type { Fragment } from '../protocol/gen/broker/protocol.js';
import type { FragmentStore } from '../stores/store.js';
import { openFragment, openFragmentFrom } from './direct/fragment-fetch.js';

export type VerifyOutcome =
  | { ok: true; fragment: Fragment; bytes: number }
  | {
      ok: false;
      fragment: Fragment;
      /** `sum`: content hashes differently; `length`: wrong size; `unreadable`: fetch or decoding failed. */
      problem: 'sum' | 'length' | 'unreadable';
      /** One line saying what is wrong. */
      reason: string;
      /** Decompressed bytes read before the outcome was known. */
      bytes: number;
    };

export interface VerifySource {
  /** A URL to fetch (signed http(s), or file:// under `fileRoot`). */
  url?: string;
  /** The fragment's store, read through its own client when there is no usable URL. */
  store?: FragmentStore;
  fileRoot?: string;
  signal?: AbortSignal;
}

/** Reads `f` from its store and checks its length and SHA-1 sum. Never throws for a bad object. */
export async function verifyFragment(f: Fragment, src: VerifySource): Promise<VerifyOutcome> {
  const want = f.end - f.begin;
  let bytes = 0;
  let stream: Readable;
  try {
    if (src.url && (!src.url.startsWith('file:') || src.fileRoot)) {
      stream = (await openFragment(src.url, f.compression_codec, { fileRoot: src.fileRoot, signal: src.signal })).stream;
    } else if (src.store) {
      const store = src.store;
      stream = await openFragmentFrom(() => store.open(fragmentContentPath(f), { signal: src.signal }), f.compression_codec, `${store.url} ${fragmentContentPath(f)}`);
    } else {
      const why = src.url ? `no --file-root for ${f.backing_store}` : `no way to read store ${f.backing_store}`;
      return { ok: false, fragment: f, problem: 'unreadable', reason: why, bytes };
    }
  } catch (e) {
    return { ok: false, fragment: f, problem: 'unreadable', reason: (e as Error).message, bytes };
  }
  const h = createHash('sha1');
  try {
    for await (const piece of stream as AsyncIterable<Buffer>) {
      h.update(piece);
      bytes += piece.length;
    }
  } catch (e) {
    return { ok: false, fragment: f, problem: 'unreadable', reason: `decoding failed after ${bytes} bytes: ${(e as Error).message}`, bytes };
  } finally {
    stream.destroy();
  }
  if (BigInt(bytes) !== want) {
    return { ok: false, fragment: f, problem: 'length', reason: `holds ${bytes} bytes, its name says ${want}`, bytes };
  }
  const got = h.digest('hex');
  const named = sumToHex(f.sum);
  if (got !== named) return { ok: false, fragment: f, problem: 'sum', reason: `content has SHA-1 ${got}, its name says ${named}`, bytes };
  return { ok: true, fragment: f, bytes };
}
