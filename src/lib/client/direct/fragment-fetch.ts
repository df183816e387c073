// Direct fragment reads: fetch a fragment object by its signed URL (file:// URLs are read
// through the file store, rooted at a local directory) and decompress it according to its codec.
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { close as closeFd, createReadStream, fstat, open as openFd, read as readFd } from 'node:fs';
import { pipeline, type Readable } from 'node:stream';
import * as zlib from 'node:zlib';
import { CompressionCodec } from '../../protocol/gen/broker/protocol.js';
import { canDecode, CHUNK, decodeFragmentStream } from '../../codecs/index.js';

export { decodeFragmentStream };
import { FileStore, openFileURL } from '../../stores/file.js';
import { StoreError } from '../../stores/store.js';
import { DirectReadError, DirectReadUnsupportedError } from './errors.js';
import { RawGet } from './http-get.js';
import { socksAgent, socksServer } from '../../socks.js';
import { alignedReadLength, pageAlignedBuffer, pieces, PIECE_SIZE } from './piece-pool.js';
import { createObjectInflate, type ObjectInflate } from './gzip-object.js';

export { DirectReadError, DirectReadUnsupportedError };

function httpGet(url: URL, acceptEncoding: string, signal?: AbortSignal): Promise<IncomingMessage> {
  const req = url.protocol === 'https:' ? httpsRequest : httpRequest;
  const socks = socksServer();
  return new Promise((resolve, reject) => {
    const r = req(url, { method: 'GET', headers: { 'accept-encoding': acceptEncoding }, signal, ...(socks ? { agent: socksAgent(socks, url.protocol === 'https:') } : {}) }, (res) => {
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

// ---- pull sources: the fast path of parallel direct reads ----------------------------------------
//
// A direct read spends its time moving bytes; every stream stage a chunk passes through costs the
// main thread a few event-loop turns. A FragmentSource hands out decompressed content one large
// piece at a time, on demand:
//   * a NONE object in a file store is read with positioned reads of up to READ_CHUNK bytes
//     straight into pooled buffers (piece-pool.ts), so each piece is one thread-pool read;
//   * a GZIP object (in a file store, or behind a signed HTTP URL) whose content is small enough
//     (WHOLE_MAX, and the caller's byte budget) is read whole and inflated in one go on libuv's
//     thread pool (gzip-object.ts), without waiting for the main thread between chunks, so
//     several such fragments decompress at once (piping the file through a gunzip stream makes
//     every output chunk wait for the consumer, through the stream's small readable buffer);
//   * anything else (HTTP, a store client's stream, other codecs, bigger objects) goes through the
//     stream decoders, with large chunks.

/** Bytes asked for by each read of an uncompressed file: one pooled buffer, mapped once. */
export const READ_CHUNK = PIECE_SIZE;
/** Reads of a NONE fragment file in flight at once (see FileSource). */
export const READS_IN_FLIGHT = 2;
/** Largest content (and stored object) of a GZIP fragment inflated in one go. */
export const WHOLE_MAX = 16 << 20;

/** Decompressed content of one fragment object, a piece at a time. */
export interface FragmentSource {
  /** Content bytes skipped at the front without being read (see OpenFragmentOptions.skip). */
  readonly skipped: bigint;
  /**
   * Bytes worth reading ahead of the consumer, where reading on later costs nothing (a local
   * file is read as fast when asked as it is ahead of time); absent: as far as the caller allows.
   */
  readonly readAhead?: number;
  /** The next piece of content, or null at the end of the object. */
  next(): Promise<Buffer | null>;
  /** Releases the object; an unfinished next() settles first where it cannot be interrupted. */
  close(): void;
}

export interface SourceOptions extends OpenFragmentOptions {
  /** Bytes the fragment holds (end - begin): sizes reads and the one-call inflate. */
  length: bigint;
  /** Largest content inflated in one go (default and at most WHOLE_MAX); larger is streamed. */
  wholeMax?: number;
}

/** A source over a stream of decompressed content. */
class StreamSource implements FragmentSource {
  private readonly it: AsyncIterator<Buffer>;
  constructor(
    private readonly stream: Readable,
    readonly skipped: bigint,
    signal?: AbortSignal,
  ) {
    this.it = (stream as AsyncIterable<Buffer>)[Symbol.asyncIterator]();
    if (signal) {
      const onAbort = () => stream.destroy();
      signal.addEventListener('abort', onAbort, { once: true });
      stream.once('close', () => signal.removeEventListener('abort', onAbort));
    }
  }
  async next(): Promise<Buffer | null> {
    const r = await this.it.next();
    return r.done ? null : r.value;
  }
  close(): void {
    this.stream.destroy();
  }
}

/**
 * A local file open for positioned reads, through the callback API of node:fs rather than a
 * fs/promises FileHandle: each FileHandle read costs the main thread more (promise and object
 * steps around the same thread-pool read). As with a
 * FileHandle, closing waits for a read in flight to settle, so that its descriptor is never
 * closed (and reused) under it; reads after close fail with EBADF.
 */
export class LocalFile {
  private inFlight = 0;
  private closing = false;
  private constructor(private readonly fd: number) {}

  static open(path: string): Promise<LocalFile> {
    return new Promise((resolve, reject) => openFd(path, 'r', (err, fd) => (err ? reject(err) : resolve(new LocalFile(fd)))));
  }

  size(): Promise<number> {
    return new Promise((resolve, reject) => fstat(this.fd, (err, st) => (err ? reject(err) : resolve(st.size))));
  }

  /** Reads up to `length` bytes at `position` into `buf` at `offset`: the bytes read. */
  read(buf: Buffer, offset: number, length: number, position: number): Promise<number> {
    if (this.closing) {
      const e = new Error('EBADF: bad file descriptor, read') as NodeJS.ErrnoException;
      e.code = 'EBADF';
      return Promise.reject(e);
    }
    this.inFlight++;
    return new Promise((resolve, reject) =>
      readFd(this.fd, buf, offset, length, position, (err, n) => {
        this.inFlight--;
        if (this.closing && this.inFlight === 0) this.closeNow();
        if (err) reject(err);
        else resolve(n);
      }),
    );
  }

  /** Closes the file, once no read is in flight. */
  close(): void {
    if (this.closing) return;
    this.closing = true;
    if (this.inFlight === 0) this.closeNow();
  }

  private closeNow(): void {
    closeFd(this.fd, () => {});
  }

  /** The descriptor, for a stream that takes the file over (and closes it). */
  takeFd(): number {
    this.closing = true;
    return this.fd;
  }
}

/** Positioned reads of an uncompressed file, `left` bytes expected (then one probe for more). */
class FileSource implements FragmentSource {
  /**
   * A few pieces: more would only hold pooled buffers (reading whole fragments ahead keeps more
   * pieces in flight than the pool keeps free, so that some are made anew for every fragment).
   */
  readonly readAhead = 4 * READ_CHUNK;
  private closed = false;
  private probed = false;
  /**
   * Reads issued ahead of next(), in file order (at most READS_IN_FLIGHT). A copy out of the page
   * cache runs on one pool thread; with two of a file's reads in flight, the fragments open at
   * once keep all of the pool's threads copying (figures in bench/results/direct.md).
   */
  private readonly inFlight: { buf: Buffer; n: number; done: Promise<number> }[] = [];
  /** Where the next read issued ahead starts, and the expected bytes after it. */
  private aheadPos: number;
  private aheadLeft: number;
  constructor(
    private readonly file: LocalFile,
    private pos: number,
    private left: number,
    readonly skipped: bigint,
  ) {
    this.aheadPos = pos;
    this.aheadLeft = left;
  }

  /** Issues reads of the expected bytes until READS_IN_FLIGHT are in flight. */
  private issue(): void {
    while (this.inFlight.length < READS_IN_FLIGHT && this.aheadLeft > 0) {
      const n = alignedReadLength(this.aheadPos, this.aheadLeft);
      const buf = pieces.get(n);
      const done = this.file.read(buf, 0, n, this.aheadPos);
      done.catch(() => {}); // awaited by next(), or dropped (see drop)
      this.inFlight.push({ buf, n, done });
      this.aheadPos += n;
      this.aheadLeft -= n;
    }
  }

  /** Drops the reads in flight: each buffer goes back once its read has settled. */
  private drop(): void {
    for (const r of this.inFlight.splice(0)) {
      const back = () => pieces.release(r.buf);
      r.done.then(back, back);
    }
  }

  async next(): Promise<Buffer | null> {
    if (this.closed) return null;
    this.issue();
    const r = this.inFlight.shift();
    if (r !== undefined) {
      let bytesRead: number;
      try {
        bytesRead = await r.done;
      } catch (e) {
        pieces.release(r.buf);
        this.drop();
        throw e;
      }
      this.pos += bytesRead;
      this.left = Math.max(0, this.left - bytesRead);
      if (bytesRead < r.n) {
        // The file is shorter than expected: what was read ahead of this read lies past its end;
        // go on one read at a time from here, as without reads ahead.
        this.drop();
        this.aheadPos = this.pos;
        this.aheadLeft = 0;
        if (bytesRead === 0) {
          pieces.release(r.buf);
          return null;
        }
        return r.buf.subarray(0, bytesRead);
      }
      this.issue();
      return r.buf;
    }
    // Past the expected length (or after a short read), one byte tells whether the file holds
    // more than it should (a caller that goes on reading anyway gets the rest in full pieces).
    const n = this.left > 0 ? alignedReadLength(this.pos, this.left) : this.probed ? READ_CHUNK : 1;
    if (this.left === 0) this.probed = true;
    const buf = pieces.get(n);
    const bytesRead = await this.file.read(buf, 0, n, this.pos);
    if (bytesRead === 0) {
      pieces.release(buf);
      return null;
    }
    this.pos += bytesRead;
    this.left = Math.max(0, this.left - bytesRead);
    return bytesRead < n ? buf.subarray(0, bytesRead) : buf;
  }
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.drop();
    this.file.close(); // once the reads in flight have settled
  }
}

/**
 * A GZIP object loaded whole (from a file, or an HTTP body) and inflated in one go on libuv's
 * thread pool, so that several such fragments inflate in parallel (createObjectInflate):
 *   * where the native inflate is built (native-inflate.ts), by libdeflate into one buffer of the
 *     fragment's content length, handed out once the whole object has inflated and been checked;
 *   * otherwise (or for an object libdeflate leaves to zlib), by one gunzip stream fed the whole
 *     object at once, which runs from start to end without waiting for the main thread (the stream
 *     is flowing, and its output is taken as it comes). Its pieces are handed out as zlib produces
 *     them, so the head fragment's content is written out while it is inflated. As with any
 *     streamed decompression, a corrupt object then fails at the point where zlib notices (its
 *     checksum is checked at the end of each member).
 */
class WholeGzipSource implements FragmentSource {
  readonly skipped = 0n;
  private state: 'new' | 'loading' | 'inflating' | 'ended' | 'closed' = 'new';
  /** Inflated content not handed out yet. */
  private readonly out: Buffer[] = [];
  private failure: unknown;
  private inflate: ObjectInflate | undefined;
  private waiter: (() => void) | undefined;
  constructor(
    private readonly load: () => Promise<Buffer>,
    private readonly release: () => void,
    /** The fragment's content length (end - begin): the native inflate's output buffer. */
    private readonly contentLength: number,
  ) {}

  private wake(): void {
    const w = this.waiter;
    this.waiter = undefined;
    w?.();
  }

  private async start(): Promise<void> {
    this.state = 'loading';
    let stored: Buffer;
    try {
      stored = await this.load();
    } finally {
      this.release(); // the object is in memory (or failed): its file or connection may go
    }
    if (this.state !== 'loading') return; // closed meanwhile
    this.state = 'inflating';
    // By libdeflate into one pooled buffer where the native inflate is built, else by a gunzip
    // stream; pieces of at most PIECE_SIZE either way (gzip-object.ts).
    const g = createObjectInflate(this.contentLength);
    this.inflate = g;
    g.on('data', (c: Buffer) => {
      this.out.push(c);
      this.wake();
    });
    g.on('error', (e) => {
      this.failure ??= e;
      this.wake();
    });
    g.on('end', () => {
      if (this.state === 'inflating') this.state = 'ended';
      // zlib has consumed all of the stored bytes (a pooled buffer when they fit in one).
      pieces.release(stored);
      this.wake();
    });
    g.end(stored);
  }

  async next(): Promise<Buffer | null> {
    if (this.state === 'new') await this.start();
    for (;;) {
      const b = this.out.shift();
      if (b) return b;
      if (this.failure !== undefined) throw this.failure;
      if (this.state !== 'inflating') return null;
      await new Promise<void>((r) => (this.waiter = r));
    }
  }

  close(): void {
    const was = this.state;
    if (was === 'closed') return;
    this.state = 'closed';
    if (was === 'new') this.release();
    // Stops an unfinished inflate; zlib holds on to its input until its pending work is done.
    this.inflate?.destroy();
    for (const b of this.out.splice(0)) pieces.release(b); // seen by nobody
    this.wake();
  }
}

/** The body of a plain HTTP GET, in the pieces the socket filled. */
class RawBodySource implements FragmentSource {
  readonly skipped = 0n;
  constructor(private readonly get: RawGet) {}
  next(): Promise<Buffer | null> {
    return this.get.next();
  }
  close(): void {
    this.get.close();
  }
}

/** The whole body of `res`, which announced `size` bytes. */
async function readBody(res: IncomingMessage, size: number): Promise<Buffer> {
  const parts: Buffer[] = [];
  let n = 0;
  for await (const c of res as AsyncIterable<Buffer>) {
    parts.push(c);
    n += c.length;
    if (n > size) break; // more than announced: let the inflate judge what arrived
  }
  return parts.length === 1 ? parts[0]! : Buffer.concat(parts, n);
}

async function readFully(file: LocalFile, size: number): Promise<Buffer> {
  const buf = size <= PIECE_SIZE ? pieces.get(size) : pageAlignedBuffer(size);
  let at = 0;
  while (at < size) {
    const bytesRead = await file.read(buf, at, size - at, at);
    if (bytesRead === 0) break;
    at += bytesRead;
  }
  return at < size ? buf.subarray(0, at) : buf;
}

/**
 * Opens the decompressed content of a fragment as a pull source: `url` (a signed URL, or file://
 * under `fileRoot`), or `open` (a store client's stream of the stored bytes) when given.
 */
export async function openFragmentSource(
  target: { url?: string; open?: () => Promise<Readable>; what: string },
  codec: CompressionCodec,
  opts: SourceOptions,
): Promise<FragmentSource> {
  if (target.open) return new StreamSource(await openFragmentFrom(target.open, codec, target.what), 0n, opts.signal);
  const url = target.url ?? '';
  let u: URL | undefined;
  try {
    u = new URL(url);
  } catch {
    /* openFragment reports it */
  }
  const raw = codec === CompressionCodec.NONE;
  const gzip = codec === CompressionCodec.GZIP || codec === CompressionCodec.GZIP_OFFLOAD_DECOMPRESSION;
  const length = Number(opts.length);
  const whole = Math.min(WHOLE_MAX, opts.wholeMax ?? WHOLE_MAX);
  // Plain http:// URLs: the lean GET of http-get.ts where the answer is one it handles. It opens
  // its own TCP connection to read into buffers of its choosing, so through a SOCKS proxy the
  // requests take node:http (with the proxy's agent) instead.
  const lean = u?.protocol === 'http:' && !socksServer();
  if (lean && codec === CompressionCodec.GZIP && length <= whole) {
    const g = await RawGet.open(u!, { accept: 'gzip', encodings: ['', 'identity', 'gzip'], wholeMax: WHOLE_MAX, maxBody: WHOLE_MAX, signal: opts.signal });
    if (g) return new WholeGzipSource(() => g.whole(), () => g.close(), length);
  }
  if (lean && raw) {
    const g = await RawGet.open(u!, { accept: 'identity', encodings: ['', 'identity'], signal: opts.signal });
    if (g) return new RawBodySource(g);
  }
  if ((u?.protocol === 'http:' || u?.protocol === 'https:') && codec === CompressionCodec.GZIP && length <= whole) {
    // A signed URL of a GZIP object: the body is the stored gzip, small next to its content.
    const res = await httpGet(u, 'gzip', opts.signal);
    const size = Number(res.headers['content-length'] ?? NaN);
    if (Number.isSafeInteger(size) && size <= WHOLE_MAX) return new WholeGzipSource(() => readBody(res, size), () => void res.destroy(), length);
    return new StreamSource(decodeFragmentStream(res, codec, false), 0n, opts.signal);
  }
  if (u?.protocol !== 'file:' || !opts.fileRoot || !(raw || gzip)) {
    const o = await openFragment(url, codec, opts);
    return new StreamSource(o.stream, o.skipped, opts.signal);
  }
  if (opts.signal?.aborted) throw new DirectReadError(`reading fragment ${url}: aborted`);
  let file: LocalFile;
  try {
    const path = new FileStore('file:///', { root: opts.fileRoot }).localPath(decodeURIComponent(u.pathname).replace(/^\/+/, ''));
    file = await LocalFile.open(path);
  } catch (e) {
    // Report the file system's own words (ENOENT …), as a read of the file would.
    const why = e instanceof StoreError && e.cause instanceof Error ? e.cause : (e as Error);
    throw new DirectReadError(`reading fragment ${url}: ${why.message}`, { cause: e });
  }
  if (raw) {
    const skip = opts.skip && opts.skip > 0n && opts.skip <= opts.length ? Number(opts.skip) : 0;
    return new FileSource(file, skip, length - skip, BigInt(skip));
  }
  try {
    const size = await file.size();
    if (length <= whole && size <= WHOLE_MAX) {
      return new WholeGzipSource(() => readFully(file, size), () => file.close(), length);
    }
  } catch (e) {
    file.close();
    throw new DirectReadError(`reading fragment ${url}: ${(e as Error).message}`, { cause: e });
  }
  const stream = createReadStream('', { fd: file.takeFd(), highWaterMark: READ_CHUNK });
  return new StreamSource(decodeFragmentStream(stream, codec, codec === CompressionCodec.GZIP_OFFLOAD_DECOMPRESSION), 0n, opts.signal);
}
