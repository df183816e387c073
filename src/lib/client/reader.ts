// A retrying journal reader: an async iterable of content chunks that tracks
// the next offset to read, adopts the broker's offset jumps, reopens the Read stream at that
// offset after transient failures (so no byte is missed or repeated), and reads persisted
// fragments directly from their stores when the broker hands back a fragment URL.
import type { ClientReadableStream } from '@grpc/grpc-js';
import { Status, type Fragment, type FragmentsResponse__Fragment, type ReadRequest, type ReadResponse, type Route } from '../protocol/gen/broker/protocol.js';
import { fragmentContentPath } from '../protocol/fragment.js';
import type { FragmentStore } from '../stores/store.js';
import { BrokerStatusError, GazctlError, TransportError } from '../protocol/errors.js';
import { DirectReadError, DirectReadUnsupportedError, openFragmentSource } from './direct/fragment-fetch.js';
import { DEFAULT_RUN_BUDGET, DEFAULT_RUN_CONCURRENCY, FragmentRunError, readFragmentRun, type RunItem } from './direct/parallel-fetch.js';
import { pieces, releaser } from './direct/piece-pool.js';
import { backoff, grpcCode, isTransientBrokerStatus, isTransientStreamCode, isUnavailable, sleep } from './retry.js';
import { latestSocksFailure } from '../socks.js';
import { formatGoDuration } from '../protocol/duration.js';
import { describeGrpcError } from './rpc.js';

/** One step of a read. Metadata steps carry `fragment`/`writeHead` and empty `content`. */
export interface ReadChunk {
  /** Journal offset of `content[0]` (for a metadata step: the offset reading continues at). */
  offset: bigint;
  content: Uint8Array;
  /** The fragment now being read (metadata steps only). */
  fragment?: Fragment;
  /** The journal's write head as of this fragment (metadata steps only). */
  writeHead?: bigint;
  /**
   * Present on content read directly from a store into a pooled buffer: gives that buffer back
   * for later reads of this process. Call it once, when nothing uses `content` any more (e.g.
   * once its write has completed), or never: an unreleased chunk stays valid for as long as it is
   * held. After the call, `content` may be overwritten at any time.
   */
  release?: () => void;
}

/** What a Reader needs from its client. */
export interface ReadTransport {
  /** Starts a Read RPC; `direct` tells whether it went to a route member rather than the service address. */
  openRead(req: ReadRequest): { call: ClientReadableStream<ReadResponse>; direct: boolean };
  noteRoute(journal: string, route: Route | undefined): void;
  forgetRoute(journal: string): void;
  readonly fileRoot?: string;
  /**
   * Lists the journal's fragments (with signed URLs when `signatureTTLms` is given). Optional:
   * without it, direct reads fetch one fragment at a time, as the broker hands out their URLs.
   */
  listFragments?(
    journal: string,
    opts: { beginModTime?: bigint; signatureTTLms?: number; timeoutMs?: number; signal?: AbortSignal },
  ): Promise<FragmentsResponse__Fragment[]>;
}

export interface RetryInfo {
  journal: string;
  attempt: number;
  delayMs: number;
  error: unknown;
}

export interface ReaderOptions {
  /** Cancels the read; iteration then ends cleanly with `offset` at the next unread byte. */
  signal?: AbortSignal;
  /** Local directory rooting file:// fragment stores (overrides the client's). */
  fileRoot?: string;
  /** Fetch fragment URLs handed back by brokers (default true). */
  directReads?: boolean;
  /** Called before each retry sleep, e.g. to log a warning. */
  onRetry?: (info: RetryInfo) => void;
  /**
   * Called when a non-blocking read ends below the journal's write head: the broker holds no
   * fragment for `offset` yet content up to `writeHead` exists (a broker that joined the route
   * after the content was written and before it was persisted, or content removed from the store).
   */
  onUnavailable?: (info: { journal: string; offset: bigint; writeHead: bigint }) => void;
  /**
   * Give up, with a TransportError, once no broker could be reached (gRPC UNAVAILABLE on every
   * attempt, nothing read) for this long; 0 or absent: retry for ever (a blocking read waits
   * for brokers to come back). An answer from a broker, even a refusal, restarts the clock.
   */
  unreachableTimeoutMs?: number;
  /** Attempts during which JOURNAL_NOT_FOUND is retried (default 5). */
  notFoundAttempts?: number;
  /** Overrides the backoff schedule (tests). */
  delay?: (attempt: number) => number;
  /**
   * Persisted fragments fetched at once by a direct read (default: one per CPU core, at least 2
   * and at most 8; 1 reads them one by one).
   * The run of fragments to fetch comes from a ListFragments of the journal.
   */
  parallel?: number;
  /** Decompressed bytes that fragments fetched ahead may hold (default 64 MiB). */
  bufferBytes?: number;
  /**
   * Opens fragment stores (e.g. `openStore` with S3 credentials). When given, fragments of a
   * store it opens are read through the store's own client (the S3 SDK, the local file system)
   * rather than by URL; a URL is still used where it throws.
   */
  openStore?: (url: string) => FragmentStore;
}

const EMPTY = new Uint8Array(0);
const MAX_DIRECT_FAILURES = 3;
/** Validity asked for the URLs of a listing made for a direct read. */
const LISTING_URL_TTL_MS = 60 * 60_000;
const LISTING_TIMEOUT_MS = 10_000;

class ReadProtocolError extends GazctlError {}

/**
 * Reads a journal from `offset` onward. Iterate it once:
 *
 *   for await (const chunk of client.read({ journal, offset: 0n })) out.write(chunk.content);
 *
 * Iteration ends at `end_offset`, at the write head of a non-blocking read
 * (OFFSET_NOT_YET_AVAILABLE), after the metadata of a metadata-only read, or on abort. It throws
 * BrokerStatusError for SUSPENDED and other terminal statuses, and TransportError for
 * non-transient transport failures.
 */
export class Reader implements AsyncIterable<ReadChunk> {
  /** Journal name as requested (may carry a `;meta` suffix). */
  readonly journal: string;
  /** Next offset to read; -1 until a write-head read resolves. */
  offset: bigint;
  /** Last known write head of the journal. */
  writeHead = 0n;
  /** Fragment most recently announced by the broker. */
  fragment: Fragment | undefined;
  /** Number of offset jumps adopted so far (skipped, deleted or unresolved ranges). */
  jumps = 0;
  /** Retries made so far. */
  retries = 0;
  private readonly req: ReadRequest;
  private readonly routeKey: string;
  private started = false;
  /** Read through brokers (without do_not_proxy) while offset < proxyUntil. */
  private proxyUntil = -2n;
  private directFailures = 0;
  /** The journal's persisted fragments as last listed for direct reads (offset order). */
  private listed: FragmentsResponse__Fragment[] | undefined;
  /** Highest fragment begin a listing was made for, so each new fragment lists at most once. */
  private listedFor = -1n;
  private readonly stores = new Map<string, FragmentStore | null>();

  constructor(
    private readonly transport: ReadTransport,
    req: ReadRequest,
    private readonly opts: ReaderOptions = {},
  ) {
    this.req = { ...req, header: undefined };
    this.journal = req.journal;
    this.routeKey = req.journal.split(';')[0]!;
    this.offset = req.offset;
  }

  get block(): boolean {
    return this.req.block;
  }

  get endOffset(): bigint {
    return this.req.end_offset;
  }

  [Symbol.asyncIterator](): AsyncIterator<ReadChunk> {
    if (this.started) throw new GazctlError('a Reader can be iterated only once');
    this.started = true;
    return this.run();
  }

  /** Reads to the end (see the class comment) and returns the content in one buffer. */
  async readAll(): Promise<Buffer> {
    const parts: Uint8Array[] = [];
    for await (const c of this) if (c.content.length) parts.push(c.content);
    return Buffer.concat(parts);
  }

  private reachedEnd(): boolean {
    return this.req.end_offset > 0n && this.offset >= this.req.end_offset;
  }

  private adopt(offset: bigint): void {
    if (offset !== this.offset) {
      if (this.offset >= 0n) this.jumps++;
      this.offset = offset;
    }
  }

  private async *run(): AsyncGenerator<ReadChunk, void, undefined> {
    const signal = this.opts.signal;
    const notFoundAttempts = this.opts.notFoundAttempts ?? 5;
    const delayFor = this.opts.delay ?? backoff;
    let attempt = 0;
    /** Since when every attempt failed to reach a broker (undefined: the last one reached one). */
    let unreachableSince: number | undefined;
    for (;;) {
      if (signal?.aborted || this.reachedEnd()) return;
      const doNotProxy = this.req.do_not_proxy && !(this.offset >= 0n && this.offset < this.proxyUntil);
      const req: ReadRequest = { ...this.req, offset: this.offset, do_not_proxy: doNotProxy };
      const { call, direct } = this.transport.openRead(req);
      const onAbort = () => call.cancel();
      signal?.addEventListener('abort', onAbort, { once: true });

      let progressed = false;
      let failure: unknown;
      let statusMsg: ReadResponse | undefined;
      let lastMeta: { fragment: Fragment; url: string } | undefined;
      let first = true;
      try {
        for await (const msg of call as AsyncIterable<ReadResponse>) {
          if (first) {
            first = false;
            if (msg.header?.route) this.transport.noteRoute(this.routeKey, msg.header.route);
          }
          if (msg.status !== Status.OK) {
            statusMsg = msg;
            break;
          }
          const content = msg.content;
          if (content.length === 0) {
            // Metadata: adopt the resolved offset (jumps over deleted or unavailable ranges).
            if (msg.offset > this.offset || this.offset < 0n) this.adopt(msg.offset);
            else if (msg.offset < this.offset) throw new ReadProtocolError(`broker answered offset ${msg.offset} to a read at ${this.offset}`);
            this.writeHead = msg.write_head;
            this.fragment = msg.fragment;
            lastMeta = msg.fragment ? { fragment: msg.fragment, url: msg.fragment_url } : undefined;
            progressed = true;
            if (this.reachedEnd()) return;
            yield { offset: this.offset, content: EMPTY, fragment: msg.fragment, writeHead: msg.write_head };
            continue;
          }
          if (msg.offset !== this.offset) {
            if (msg.offset > this.offset) this.adopt(msg.offset);
            else throw new ReadProtocolError(`broker sent content at ${msg.offset}, expected ${this.offset}`);
          }
          lastMeta = undefined;
          progressed = true;
          const chunk: ReadChunk = { offset: this.offset, content };
          this.offset += BigInt(content.length);
          yield chunk;
        }
      } catch (err) {
        failure = err;
      } finally {
        signal?.removeEventListener('abort', onAbort);
        // grpc-js does not cancel a call when its stream is destroyed (e.g. the consumer stopped
        // iterating); cancelling a finished call is a no-op.
        call.cancel();
      }
      if (signal?.aborted) return;
      if (progressed) attempt = 0;

      if (statusMsg) {
        const s = statusMsg.status;
        if (statusMsg.write_head > 0n) this.writeHead = statusMsg.write_head;
        if (s === Status.OFFSET_NOT_YET_AVAILABLE) {
          if (statusMsg.offset > this.offset) this.adopt(statusMsg.offset);
          else if (this.offset < 0n && this.writeHead > 0n) this.adopt(this.writeHead);
          if (!this.req.block) {
            if (this.offset >= 0n && statusMsg.write_head > this.offset) this.opts.onUnavailable?.({ journal: this.journal, offset: this.offset, writeHead: statusMsg.write_head });
            return;
          }
          failure = new BrokerStatusError(s, `reading ${this.journal}`);
        } else if (s === Status.JOURNAL_NOT_FOUND && attempt + 1 < notFoundAttempts) {
          failure = new BrokerStatusError(s, `reading ${this.journal}`);
        } else if (isTransientBrokerStatus(s)) {
          if (!statusMsg.header?.route?.members.length) this.transport.forgetRoute(this.routeKey);
          failure = new BrokerStatusError(s, `reading ${this.journal}`);
        } else {
          throw new BrokerStatusError(s, `reading ${this.journal}`);
        }
      } else if (failure !== undefined) {
        const code = grpcCode(failure);
        if (code !== undefined) {
          if (!isTransientStreamCode(code)) {
            throw new TransportError(`reading ${this.journal}: ${describeGrpcError(failure)}`, code, { cause: failure });
          }
          if (direct) this.transport.forgetRoute(this.routeKey);
        } else if (!(failure instanceof ReadProtocolError)) {
          throw failure;
        }
      } else {
        // The broker closed the stream cleanly.
        if (this.req.metadata_only || this.reachedEnd()) return;
        if (lastMeta && doNotProxy) {
          const { fragment, url } = lastMeta;
          if (url && this.opts.directReads !== false) {
            try {
              yield* this.readDirectRun(fragment, url);
              this.directFailures = 0;
              attempt = 0;
              continue;
            } catch (err) {
              if (signal?.aborted) return;
              // A failure inside a run of fragments is about the fragment that failed.
              const failed = err instanceof FragmentRunError ? err.fragment : fragment;
              if (err instanceof DirectReadUnsupportedError || (err instanceof FragmentRunError && err.cause instanceof DirectReadUnsupportedError)) {
                this.proxyUntil = failed.end;
                this.note(err, attempt, 0);
                continue;
              }
              if (!(err instanceof DirectReadError)) throw err;
              if (++this.directFailures >= MAX_DIRECT_FAILURES) {
                this.proxyUntil = failed.end;
                this.directFailures = 0;
              }
              failure = err;
            }
          } else {
            // No URL to fetch (or direct reads are off): let a broker stream this fragment.
            this.proxyUntil = fragment.end;
            continue;
          }
        } else if (progressed) {
          continue; // reopen at once
        } else {
          failure = new ReadProtocolError('read stream closed without data');
        }
      }

      if (isUnavailable(failure) && !progressed) {
        unreachableSince ??= Date.now();
        const limit = this.opts.unreachableTimeoutMs ?? 0;
        if (limit > 0 && Date.now() - unreachableSince >= limit) {
          // Through a SOCKS proxy, grpc-js only saw its tunnel drop: the proxy's words say why.
          const why = latestSocksFailure() ?? describeGrpcError(failure);
          throw new TransportError(`reading ${this.journal}: no broker could be reached for ${formatGoDuration(BigInt(limit) * 1_000_000n)}: ${why}`, grpcCode(failure), { cause: failure });
        }
      } else {
        unreachableSince = undefined;
      }
      const ms = delayFor(attempt);
      this.note(failure, attempt, ms);
      attempt++;
      try {
        await sleep(ms, signal);
      } catch {
        return; // aborted
      }
    }
  }

  private note(error: unknown, attempt: number, delayMs: number): void {
    this.retries++;
    this.opts.onRetry?.({ journal: this.journal, attempt, delayMs, error });
  }

  /**
   * Reads `fragment` (whose URL the broker handed back) and the persisted fragments that follow it
   * without a gap, several at once, in offset order; then the broker takes over again.
   */
  private async *readDirectRun(fragment: Fragment, url: string): AsyncGenerator<ReadChunk, void, undefined> {
    const items = await this.planRun(fragment, url);
    if (items.length === 1) {
      yield* this.readDirect(fragment, url);
      return;
    }
    if (this.offset < fragment.begin || this.offset >= fragment.end) {
      throw new DirectReadError(`offset ${this.offset} is outside fragment [${fragment.begin}, ${fragment.end})`);
    }
    const run = readFragmentRun(items, {
      from: this.offset,
      stopAt: this.req.end_offset,
      concurrency: this.opts.parallel ?? DEFAULT_RUN_CONCURRENCY,
      budgetBytes: this.opts.bufferBytes ?? DEFAULT_RUN_BUDGET,
      fileRoot: this.opts.fileRoot ?? this.transport.fileRoot,
      signal: this.opts.signal,
    });
    for await (const ev of run) {
      if (ev.content.length === 0) {
        // The first fragment was announced by the broker; announce the following ones alike.
        if (ev.index === 0) continue;
        this.fragment = ev.fragment;
        yield { offset: this.offset, content: EMPTY, fragment: ev.fragment, writeHead: this.writeHead };
        continue;
      }
      const chunk: ReadChunk = { offset: this.offset, content: ev.content };
      if (pieces.owns(ev.content)) chunk.release = ev.release;
      this.offset += BigInt(ev.content.length);
      yield chunk;
    }
  }

  /** The run to read directly from `fragment` on: it alone, unless a listing shows more. */
  private async planRun(fragment: Fragment, url: string): Promise<RunItem[]> {
    // A URL where there is one (the broker signed it), else the store's own client.
    const first: RunItem = { fragment, url };
    const parallel = this.opts.parallel ?? DEFAULT_RUN_CONCURRENCY;
    const list = this.transport.listFragments?.bind(this.transport);
    if (parallel <= 1 || !list) return [first];
    const same = (f: FragmentsResponse__Fragment) => f.spec?.begin === fragment.begin && f.spec.end === fragment.end;
    let idx = this.listed?.findIndex(same) ?? -1;
    if (idx < 0 && fragment.begin > this.listedFor) {
      this.listedFor = fragment.begin;
      try {
        const all = await list(this.routeKey, {
          beginModTime: this.req.begin_mod_time,
          signatureTTLms: LISTING_URL_TTL_MS,
          timeoutMs: LISTING_TIMEOUT_MS,
          signal: this.opts.signal,
        });
        this.listed = all.filter((f) => f.spec && f.spec.mod_time !== 0n);
      } catch {
        this.listed = undefined; // e.g. a broker without ListFragments: one fragment at a time
      }
      idx = this.listed?.findIndex(same) ?? -1;
    }
    if (idx < 0) return [first];
    const items = [first];
    const stopAt = this.req.end_offset;
    let end = fragment.end;
    for (let j = idx + 1; j < this.listed!.length; j++) {
      if (stopAt > 0n && end >= stopAt) break;
      const f = this.listed![j]!;
      const spec = f.spec!;
      if (spec.begin !== end) break; // a gap: the broker says what comes next
      const open = f.signed_url ? undefined : this.storeOpener(spec);
      if (!open && !f.signed_url) break;
      items.push({ fragment: spec, url: f.signed_url || undefined, open });
      end = spec.end;
    }
    return items;
  }

  /** Opens `f` through the configured store client, where one is configured for its store. */
  private storeOpener(f: Fragment): (() => Promise<import('node:stream').Readable>) | undefined {
    const openStore = this.opts.openStore;
    if (!openStore || !f.backing_store) return undefined;
    let store = this.stores.get(f.backing_store);
    if (store === undefined) {
      try {
        store = openStore(f.backing_store);
      } catch {
        store = null;
      }
      this.stores.set(f.backing_store, store);
    }
    if (!store) return undefined;
    const s = store;
    return () => s.open(fragmentContentPath(f), { signal: this.opts.signal });
  }

  /** Streams [offset, fragment.end) of a fragment fetched from its store. */
  private async *readDirect(fragment: Fragment, url: string): AsyncGenerator<ReadChunk, void, undefined> {
    const end = fragment.end;
    if (this.offset < fragment.begin || this.offset >= end) {
      throw new DirectReadError(`offset ${this.offset} is outside fragment [${fragment.begin}, ${end})`);
    }
    const stopAt = this.req.end_offset > 0n && this.req.end_offset < end ? this.req.end_offset : end;
    const src = await openFragmentSource({ url, what: url }, fragment.compression_codec, {
      fileRoot: this.opts.fileRoot ?? this.transport.fileRoot,
      signal: this.opts.signal,
      skip: this.offset - fragment.begin,
      length: end - fragment.begin,
      wholeMax: this.opts.bufferBytes ?? DEFAULT_RUN_BUDGET,
    });
    let pos = fragment.begin + src.skipped;
    let toSkip = Number(this.offset - pos);
    try {
      for (let piece = await src.next(); piece !== null; piece = await src.next()) {
        let b = piece;
        if (toSkip > 0) {
          if (b.length <= toSkip) {
            toSkip -= b.length;
            pos += BigInt(b.length);
            pieces.release(b); // skipped, seen by nobody
            continue;
          }
          b = b.subarray(toSkip);
          pos += BigInt(toSkip);
          toSkip = 0;
        }
        const next = pos + BigInt(b.length);
        if (next > end) throw new DirectReadError(`fragment ${url} holds more than its ${end - fragment.begin} bytes`);
        if (next > stopAt) b = b.subarray(0, Number(stopAt - pos));
        if (b.length > 0) {
          const chunk: ReadChunk = { offset: this.offset, content: b };
          if (pieces.owns(b)) chunk.release = releaser(b);
          pos += BigInt(b.length);
          this.offset = pos;
          yield chunk;
        }
        if (stopAt < end && pos >= stopAt) return;
      }
    } catch (err) {
      if (err instanceof DirectReadError) throw err;
      throw new DirectReadError(`reading fragment ${url}: ${(err as Error).message}`, { cause: err });
    } finally {
      src.close();
    }
    if (pos !== end) {
      throw new DirectReadError(`unexpected EOF reading fragment ${url}: ended at ${pos}, expected ${end}`);
    }
  }
}
