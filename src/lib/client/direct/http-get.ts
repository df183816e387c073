// A lean HTTP/1.1 GET for fragment objects behind plain http:// signed URLs.
//
// Fetching a fragment through node:http costs the main thread one stream step per socket read
// (64 KiB, each into a freshly allocated buffer), plus the parser's and the IncomingMessage's
// work for every one of them. Here the socket reads straight into the buffers we hand out (the
// `onread` option of net.Socket, whose buffer we choose before each read): the body lands in
// PIECE-sized buffers, or in one buffer of the whole body, with no copy and no stream in
// between: a fraction of node:http's main-thread work per byte (docs/direct-reads.md).
//
// Only the simple, common case is handled: a `200` answer whose body is delimited by
// Content-Length and has no Content-Encoding other than the one asked for. Anything else that is
// not an error (chunked bodies, unexpected encodings, bodies bigger than the caller wants whole)
// is answered `undefined`, and the caller fetches the object again through node:http. An error
// status is reported as node:http's path reports it. https:// URLs always go through node:https.
import { connect, type Socket } from 'node:net';
// (A cycle with fragment-fetch.ts, harmless: the class is used only when a request runs.)
import { DirectReadError } from './errors.js';
import { pageAlignedBuffer, pieces, PIECE_SIZE } from './piece-pool.js';

/** Bytes of body in each piece handed out (the last may be shorter): one pooled buffer. */
export const PIECE = PIECE_SIZE;
/** Largest response head accepted. */
const MAX_HEAD = 64 * 1024;
const CRLFCRLF = Buffer.from('\r\n\r\n', 'latin1');

export interface RawGetOptions {
  /** Value of the Accept-Encoding header. */
  accept: string;
  /** Content-Encoding values taken as the stored bytes (lower case; '' is none). */
  encodings: readonly string[];
  /** Bodies up to this size are read into one buffer (see RawGet.whole); 0: never. */
  wholeMax?: number;
  /** Bodies bigger than this are left to node:http (undefined is answered). */
  maxBody?: number;
  signal?: AbortSignal;
}

/** The parsed head of a response. */
export interface RawHead {
  status: number;
  message: string;
  /** Header values by lower-cased name (repeated headers joined with ", "). */
  headers: Map<string, string>;
}

function parseHead(text: string): RawHead | undefined {
  const lines = text.split('\r\n');
  const m = /^HTTP\/1\.[01] (\d{3})(?: (.*))?$/.exec(lines[0] ?? '');
  if (!m) return undefined;
  const headers = new Map<string, string>();
  for (let i = 1; i < lines.length; i++) {
    const l = lines[i]!;
    const c = l.indexOf(':');
    if (c <= 0) return undefined;
    const name = l.slice(0, c).trim().toLowerCase();
    const value = l.slice(c + 1).trim();
    const had = headers.get(name);
    headers.set(name, had === undefined ? value : `${had}, ${value}`);
  }
  return { status: Number(m[1]), message: m[2] ?? '', headers };
}

/**
 * One GET in flight. `open` resolves once the head has arrived: with the response when it is
 * one this client handles, or undefined (the caller should use node:http).
 */
export class RawGet {
  /** Body bytes announced by Content-Length. */
  length = 0;
  private socket!: Socket;
  private readonly where: string;
  /** The buffer reads land in: the head, then the body piece being filled. */
  private buf: Buffer;
  private fill = 0;
  private headDone = false;
  private wholeBody = false;
  /** Body bytes not read yet. */
  private left = 0;
  private readonly ready: Buffer[] = [];
  private ended = false;
  private failure: Error | undefined;
  private paused = false;
  private waiter: (() => void) | undefined;
  private onHead!: (v: RawGet | undefined) => void;
  private onHeadError!: (e: Error) => void;
  private readonly opts: RawGetOptions;
  private readonly onAbort = () => this.fail(new DirectReadError(`fetching fragment ${this.where}: aborted`));

  private constructor(url: URL, opts: RawGetOptions) {
    this.opts = opts;
    this.where = `${url.origin}${url.pathname}`;
    // The head (and the first body bytes that come with it, copied to the first piece).
    this.buf = pieces.get(MAX_HEAD);
  }

  static open(url: URL, opts: RawGetOptions): Promise<RawGet | undefined> {
    const g = new RawGet(url, opts);
    return new Promise<RawGet | undefined>((resolve, reject) => {
      g.onHead = resolve;
      g.onHeadError = reject;
      if (opts.signal?.aborted) {
        reject(new DirectReadError(`fetching fragment ${g.where}: aborted`));
        return;
      }
      opts.signal?.addEventListener('abort', g.onAbort, { once: true });
      const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
      g.socket = connect({
        host,
        port: Number(url.port || 80),
        onread: { buffer: () => g.target(), callback: (n: number) => g.onRead(n) },
      });
      g.socket.setNoDelay(true);
      g.socket.on('error', (e) => g.fail(new DirectReadError(`fetching fragment ${g.where}: ${e.message}`, { cause: e })));
      g.socket.on('end', () => g.onEnd());
      g.socket.on('close', () => opts.signal?.removeEventListener('abort', g.onAbort));
      g.socket.write(
        `GET ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${url.host}\r\nAccept-Encoding: ${opts.accept}\r\nConnection: close\r\n\r\n`,
        'latin1',
      );
    });
  }

  /** Where the next socket read goes. */
  private target(): Buffer {
    if (!this.headDone) return this.buf.subarray(this.fill);
    if (this.fill === this.buf.length) this.nextBuffer();
    return this.buf.subarray(this.fill, this.fill + Math.min(this.left, this.buf.length - this.fill));
  }

  private nextBuffer(): void {
    this.buf = pieces.get(Math.min(PIECE, Math.max(1, this.left)));
    this.fill = 0;
  }

  private onRead(n: number): boolean {
    if (this.ended) return false;
    this.fill += n;
    if (!this.headDone) return this.readHead();
    this.left -= n;
    if (this.left === 0 || (!this.wholeBody && this.fill === this.buf.length)) {
      if (this.fill > 0) this.ready.push(this.fill === this.buf.length ? this.buf : this.buf.subarray(0, this.fill));
      if (this.left === 0) this.finish();
      else this.nextBuffer();
      this.wake();
    }
    // Hold the socket while a piece waits for the consumer: it reads on when asked.
    if (this.ready.length > 0 && this.left > 0) {
      this.paused = true;
      return false;
    }
    return true;
  }

  private readHead(): boolean {
    const at = this.buf.subarray(0, this.fill).indexOf(CRLFCRLF);
    if (at < 0) {
      if (this.fill >= MAX_HEAD) this.fail(new DirectReadError(`fetching fragment ${this.where}: response head is too large or malformed`));
      return !this.ended;
    }
    const head = parseHead(this.buf.toString('latin1', 0, at));
    if (!head) {
      this.fail(new DirectReadError(`fetching fragment ${this.where}: malformed HTTP response`));
      return false;
    }
    if (head.status !== 200) {
      this.fail(new DirectReadError(`fetching fragment ${this.where}: HTTP ${head.status} ${head.message}`.trim()));
      return false;
    }
    const cl = head.headers.get('content-length');
    const te = head.headers.get('transfer-encoding');
    const ce = (head.headers.get('content-encoding') ?? '').toLowerCase();
    const length = cl !== undefined && /^\d+$/.test(cl) ? Number(cl) : NaN;
    if (!Number.isSafeInteger(length) || te !== undefined || !this.opts.encodings.includes(ce) || length > (this.opts.maxBody ?? Infinity)) {
      this.close();
      this.onHead(undefined);
      return false;
    }
    const body = this.buf.subarray(at + CRLFCRLF.length, this.fill);
    if (body.length > length) {
      // Bytes past the announced body: the server is not speaking HTTP as we expect.
      this.fail(new DirectReadError(`fetching fragment ${this.where}: more bytes than the announced ${length}`));
      return false;
    }
    this.headDone = true;
    this.length = length;
    this.left = length - body.length;
    this.wholeBody = length <= (this.opts.wholeMax ?? 0);
    const n = this.wholeBody ? Math.max(1, length) : Math.min(PIECE, Math.max(1, length));
    const first = n <= PIECE ? pieces.get(n) : pageAlignedBuffer(n);
    body.copy(first, 0);
    pieces.release(this.buf); // the head's buffer: no read lands in it any more, nobody else saw it
    this.buf = first;
    this.fill = body.length;
    const wait = this.onRead(0) !== false; // hands out a piece that is already complete
    this.onHead(this);
    return wait && !this.ended;
  }

  private finish(): void {
    this.ended = true;
    this.socket.destroy();
  }

  private onEnd(): void {
    if (this.ended) return;
    if (!this.headDone) this.fail(new DirectReadError(`fetching fragment ${this.where}: connection closed before the response`));
    else this.fail(new DirectReadError(`fetching fragment ${this.where}: connection closed after ${this.length - this.left} of ${this.length} bytes`));
  }

  private fail(e: Error): void {
    if (this.ended) return;
    this.ended = true;
    this.failure = e;
    this.socket?.destroy();
    if (!this.headDone) this.onHeadError(e);
    this.wake();
  }

  private wake(): void {
    const w = this.waiter;
    this.waiter = undefined;
    w?.();
  }

  /** The next piece of the body (at most PIECE bytes), or null after the last. */
  async next(): Promise<Buffer | null> {
    for (;;) {
      const b = this.ready.shift();
      if (b) {
        if (this.paused && !this.ended) {
          this.paused = false;
          this.socket.resume();
        }
        return b;
      }
      if (this.failure) throw this.failure;
      if (this.ended) return null;
      if (this.paused) {
        this.paused = false;
        this.socket.resume();
      }
      await new Promise<void>((r) => (this.waiter = r));
    }
  }

  /** The whole body in one buffer (for a body of at most `wholeMax` bytes). */
  async whole(): Promise<Buffer> {
    if (!this.wholeBody) throw new RangeError('RawGet.whole: the body is not read whole');
    const b = await this.next();
    return b ?? Buffer.alloc(0);
  }

  /** Stops reading and drops the connection. */
  close(): void {
    if (this.ended) return;
    this.ended = true;
    this.socket?.destroy();
    this.wake();
  }
}
