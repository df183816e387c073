// Direct fragment reads: fetch a fragment object by its signed URL (file:// URLs are read
// through the file store, rooted at a local directory) and decompress it according to its codec.
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { pipeline, type Readable } from 'node:stream';
import * as zlib from 'node:zlib';
import { CompressionCodec } from '../protocol/gen/broker/protocol.js';
import { GazctlError } from '../protocol/errors.js';
import { canDecode, CHUNK, decompressor } from '../codecs/index.js';
import { openFileURL } from '../stores/file.js';
import { StoreError } from '../stores/store.js';

/** A direct fragment read failed (HTTP status, I/O, corrupt or mis-sized content). */
export class DirectReadError extends GazctlError {}

/**
 * This client cannot read the fragment directly (codec without a decoder in this Node, URL
 * scheme without a handler, no file root); the caller should read through a broker instead.
 */
export class DirectReadUnsupportedError extends DirectReadError {}

function httpGet(url: URL, acceptEncoding: string, signal?: AbortSignal): Promise<IncomingMessage> {
  const req = url.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const r = req(url, { method: 'GET', headers: { 'accept-encoding': acceptEncoding }, signal }, (res) => {
      if (res.statusCode !== 200) {
        res.resume();
        reject(new DirectReadError(`fetching fragment ${url.origin}${url.pathname}: HTTP ${res.statusCode} ${res.statusMessage ?? ''}`.trim()));
        return;
      }
      resolve(res);
    });
    r.on('error', (err) => reject(new DirectReadError(`fetching fragment ${url.origin}${url.pathname}: ${err.message}`, { cause: err })));
    r.end();
  });
}

export interface OpenFragmentOptions {
  /** Local directory rooting file:// fragment stores. */
  fileRoot?: string;
  signal?: AbortSignal;
  /**
   * Uncompressed bytes the caller will discard from the front. Only honoured where skipping is
   * free (uncompressed local files); see `skipped` in the result.
   */
  skip?: bigint;
}

export interface OpenedFragment {
  /** Decompressed fragment content, starting `skipped` bytes after the fragment's begin. */
  stream: Readable;
  skipped: bigint;
}

/** Opens the decompressed content of a fragment object. */
export async function openFragment(
  url: string,
  codec: CompressionCodec,
  opts: OpenFragmentOptions = {},
): Promise<OpenedFragment> {
  if (!canDecode(codec)) {
    const name = CompressionCodec[codec] ?? String(codec);
    throw new DirectReadUnsupportedError(
      codec === CompressionCodec.ZSTANDARD
        ? `cannot decompress ZSTANDARD fragments: this Node.js (${process.version}) has no zstd decoder`
        : `cannot decompress fragments with codec ${name}`,
    );
  }
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new DirectReadError(`invalid fragment URL ${JSON.stringify(url)}`);
  }
  let raw: Readable;
  let transportGzip = false;
  let skipped = 0n;
  if (u.protocol === 'file:') {
    if (!opts.fileRoot) throw new DirectReadUnsupportedError(`cannot read ${url}: no file root is configured for file:// stores`);
    const start = codec === CompressionCodec.NONE && opts.skip && opts.skip > 0n ? opts.skip : 0n;
    try {
      raw = await openFileURL(opts.fileRoot, u, { start: Number(start), signal: opts.signal });
    } catch (e) {
      // Report the file system's own words (ENOENT …), as a read of the file would.
      const why = e instanceof StoreError && e.cause instanceof Error ? e.cause : (e as Error);
      throw new DirectReadError(`reading fragment ${url}: ${why.message}`, { cause: e });
    }
    skipped = start;
    if (codec === CompressionCodec.GZIP_OFFLOAD_DECOMPRESSION) transportGzip = true; // stored as gzip
  } else if (u.protocol === 'http:' || u.protocol === 'https:') {
    // GZIP objects must arrive as stored; offloaded ones are decompressed by the store.
    const accept = codec === CompressionCodec.GZIP_OFFLOAD_DECOMPRESSION ? 'identity' : codec === CompressionCodec.GZIP ? 'gzip' : 'identity';
    const res = await httpGet(u, accept, opts.signal);
    const enc = String(res.headers['content-encoding'] ?? '').toLowerCase();
    transportGzip = enc === 'gzip' && codec !== CompressionCodec.GZIP;
    raw = res;
  } else {
    throw new DirectReadUnsupportedError(`cannot read fragment URL scheme ${u.protocol}`);
  }

  return { stream: decodeFragmentStream(raw, codec, transportGzip), skipped };
}

/**
 * Opens the decompressed content of a fragment object through a store client (e.g. the S3 client
 * of an s3:// store) rather than a URL: `open` gives the stored bytes as they are.
 */
export async function openFragmentFrom(open: () => Promise<Readable>, codec: CompressionCodec, what: string): Promise<Readable> {
  if (!canDecode(codec)) throw new DirectReadUnsupportedError(`cannot decompress fragments with codec ${CompressionCodec[codec] ?? String(codec)}`);
  let raw: Readable;
  try {
    raw = await open();
  } catch (e) {
    throw new DirectReadError(`reading fragment ${what}: ${(e as Error).message}`, { cause: e });
  }
  // A store client hands back the bytes as stored: GZIP_OFFLOAD_DECOMPRESSION objects are gzip.
  return decodeFragmentStream(raw, codec, codec === CompressionCodec.GZIP_OFFLOAD_DECOMPRESSION);
}

/** The stored bytes `raw` of a `codec` fragment, decompressed (`transportGzip`: gunzip first). */
export function decodeFragmentStream(raw: Readable, codec: CompressionCodec, transportGzip: boolean): Readable {
  const stages: NodeJS.ReadWriteStream[] = [];
  if (transportGzip) stages.push(zlib.createGunzip({ chunkSize: CHUNK }));
  const decoder = decompressor(codec);
  if (decoder) stages.push(decoder);
  if (stages.length === 0) return raw;
  const last = stages[stages.length - 1] as unknown as Readable;
  // pipeline() destroys every stage on error, so the error surfaces on the last one.
  (pipeline as unknown as (...args: unknown[]) => void)(raw, ...stages, (err: Error | null) => {
    if (err && !last.destroyed) last.destroy(err);
  });
  return last;
}
