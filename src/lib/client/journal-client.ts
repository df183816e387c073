// JournalClient: a routed, retrying client of the protocol.Journal service (its List, Apply, Read,
// Append, ListFragments and FragmentStoreHealth RPCs). Wraps the generated grpc-js stub.
import type { ClientReadableStream, ClientWritableStream, ServiceError } from '@grpc/grpc-js';
import {
  JournalService,
  Status,
  type ApplyRequest_Change,
  type ApplyResponse,
  type AppendRequest,
  type AppendResponse,
  type FragmentStoreHealthResponse,
  type FragmentsResponse,
  type FragmentsResponse__Fragment,
  type Header,
  type LabelSelector,
  type ListRequest,
  type ListResponse,
  type ReadRequest,
  type ReadResponse,
  type Route,
} from '../protocol/gen/broker/protocol.js';
import { applyInBatches, type ApplyOptions, type ApplyResult } from './apply.js';
import { nanosToDuration } from '../protocol/duration.js';
import { BrokerStatusError, GazctlError, TransportError } from '../protocol/errors.js';
import { Appender, type AppendOptions, type AppendTransport } from './appender.js';
import { claimsFor } from './auth.js';
import { ConnectionPool, type ServiceConfig } from './dial.js';
import { Reader, type ReaderOptions, type ReadTransport } from './reader.js';
import { abortError, backoff, grpcCode, isTransientBrokerStatus, isTransientStreamCode, sleep } from './retry.js';
import { pickEndpoint, RouteCache } from './route-cache.js';
import {
  decodeReadResponse,
  encodeAppendMessage,
  retryCall,
  transportError,
  unaryCall,
  type AppendContent,
  type CallOptions,
  type RetryHook,
} from './rpc.js';

export type { CallOptions } from './rpc.js';

export interface JournalClientOptions {
  /** Share connections with other clients. */
  pool?: ConnectionPool;
  /** Local directory rooting file:// fragment stores for direct reads. */
  fileRoot?: string;
  /** Called before each retry sleep (for logging). */
  onRetry?: RetryHook;
  /** Overrides the backoff schedule (tests). */
  delay?: (attempt: number) => number;
}

export interface ListFragmentsOptions extends CallOptions {
  /** Unix seconds; skip fragments persisted before this. */
  beginModTime?: bigint | number;
  /** Unix seconds; skip fragments persisted after this (and local ones). */
  endModTime?: bigint | number;
  /** Sign fragment URLs valid for this long. */
  signatureTTLms?: number;
  /** Fragments per page (server default 1000). */
  pageLimit?: number;
}

/** Attempts for RPCs that Go's gazctl makes fail-fast (ListFragments, FragmentStoreHealth). */
const FAIL_FAST_ATTEMPTS = 5;

export class JournalClient implements ReadTransport, AppendTransport {
  readonly pool: ConnectionPool;
  readonly routes: RouteCache | undefined;
  readonly fileRoot: string | undefined;
  private readonly ownsPool: boolean;

  constructor(
    readonly config: ServiceConfig,
    private readonly opts: JournalClientOptions = {},
  ) {
    this.ownsPool = !opts.pool;
    this.pool = opts.pool ?? new ConnectionPool(config);
    this.routes = config.cacheSize && config.cacheSize > 0 ? new RouteCache(config.cacheSize, config.cacheTTLms ?? 60_000) : undefined;
    this.fileRoot = opts.fileRoot;
  }

  /** The configured broker address. */
  get address(): string {
    return this.config.address;
  }

  /** Closes the connections (when this client created its pool). */
  close(): void {
    if (this.ownsPool) this.pool.close();
  }

  // ---- routing ------------------------------------------------------------------------------

  /** @internal Endpoint for an RPC about `journal`, or undefined for the service address. */
  endpointFor(journal: string, primary: boolean): string | undefined {
    if (!this.routes) return undefined;
    return pickEndpoint(this.routes.get(journal), {
      primary,
      zone: this.config.zone,
      state: (ep) => this.pool.state(ep),
    });
  }

  /** @internal */
  noteRoute(journal: string, route: Route | undefined): void {
    if (this.routes && route && route.members.length > 0) this.routes.set(journal, route);
  }

  /** @internal */
  forgetRoute(journal: string): void {
    this.routes?.delete(journal);
  }

  private withRetry<T>(
    op: string,
    opts: CallOptions,
    fn: (deadline: number | undefined) => Promise<T>,
    extra: { more?: (err: unknown) => boolean; maxAttempts?: number } = {},
  ): Promise<T> {
    return retryCall(`broker ${this.address}`, op, opts, fn, { ...extra, delay: this.opts.delay, onRetry: this.opts.onRetry });
  }

  // ---- List / watch ---------------------------------------------------------------------------

  private listRequest(selector: LabelSelector, watch: boolean, resume?: Header): ListRequest {
    return { selector, watch, watch_resume: resume };
  }

  private openList(req: ListRequest, deadline?: number): ClientReadableStream<ListResponse> {
    const md = this.pool.metadata(claimsFor.journalList(req.selector));
    return this.pool.journal().list(req, md, deadline !== undefined ? { deadline } : {});
  }

  /** Lists journals matching `selector`, merging the streamed snapshot into one response. */
  async list(selector: LabelSelector, opts: CallOptions = {}): Promise<ListResponse> {
    const res = await this.withRetry('listing journals', opts, (deadline) => this.listOnce(selector, deadline, opts.signal));
    for (const j of res.journals) if (j.spec) this.noteRoute(j.spec.name, j.route);
    return res;
  }

  private async listOnce(selector: LabelSelector, deadline: number | undefined, signal?: AbortSignal): Promise<ListResponse> {
    if (signal?.aborted) throw abortError(signal);
    const call = this.openList(this.listRequest(selector, false), deadline);
    const onAbort = () => call.cancel();
    signal?.addEventListener('abort', onAbort, { once: true });
    let out: ListResponse | undefined;
    try {
      for await (const msg of call as AsyncIterable<ListResponse>) {
        if (!out) {
          if (msg.status !== Status.OK) throw new BrokerStatusError(msg.status, 'listing journals');
          out = msg;
        } else {
          if (msg.journals.length === 0) throw new GazctlError('listing journals: unexpected empty ListResponse continuation');
          for (const j of msg.journals) out.journals.push(j);
        }
      }
    } finally {
      signal?.removeEventListener('abort', onAbort);
      call.cancel();
    }
    if (!out) throw new GazctlError('listing journals: the broker closed the stream without a response');
    return out;
  }

  /**
   * Watches journals matching `selector`: yields each complete snapshot (sent again whenever the
   * matched set changes). Transport failures resume the watch from the last snapshot's header.
   * Ends cleanly when `signal` aborts; throws BrokerStatusError on a non-OK status.
   */
  async *watch(selector: LabelSelector, opts: { signal?: AbortSignal } = {}): AsyncGenerator<ListResponse, void, undefined> {
    const { signal } = opts;
    let resume: Header | undefined;
    let attempt = 0;
    const delayFor = this.opts.delay ?? backoff;
    while (!signal?.aborted) {
      const call = this.openList(this.listRequest(selector, true, resume));
      const onAbort = () => call.cancel();
      signal?.addEventListener('abort', onAbort, { once: true });
      let failure: unknown;
      try {
        let cur: ListResponse | undefined;
        for await (const msg of call as AsyncIterable<ListResponse>) {
          if (!cur) {
            if (msg.status !== Status.OK) throw new BrokerStatusError(msg.status, 'watching journals');
            cur = { status: msg.status, header: msg.header, journals: msg.journals.slice() };
            continue;
          }
          if (msg.journals.length > 0) {
            for (const j of msg.journals) cur.journals.push(j);
            continue;
          }
          // End of snapshot.
          const snap = cur;
          cur = undefined;
          const rev = snap.header?.etcd?.revision ?? 0n;
          const resumeRev = resume?.etcd?.revision ?? 0n;
          if (resume && rev <= resumeRev) continue; // stale: not newer than what we have
          resume = snap.header;
          attempt = 0;
          for (const j of snap.journals) if (j.spec) this.noteRoute(j.spec.name, j.route);
          yield snap;
        }
      } catch (err) {
        failure = err;
      } finally {
        signal?.removeEventListener('abort', onAbort);
        call.cancel();
      }
      if (signal?.aborted) return;
      if (failure !== undefined) {
        if (failure instanceof BrokerStatusError) throw failure;
        const code = grpcCode(failure);
        if (code === undefined) throw failure;
        if (!isTransientStreamCode(code)) throw transportError(`broker ${this.address}`, 'watching journals', failure, undefined, false);
      }
      const ms = delayFor(attempt);
      this.opts.onRetry?.({ op: 'watching journals', attempt, delayMs: ms, error: failure ?? new GazctlError('watch stream closed') });
      attempt++;
      try {
        await sleep(ms, signal);
      } catch {
        return;
      }
    }
  }

  // ---- Apply ----------------------------------------------------------------------------------

  /**
   * Applies `changes`, in batches of `maxTxnSize` (0 or absent: one request), sequentially,
   * stopping at the first failing batch with an ApplyError. Returns the final etcd revision, the
   * number of batches and the last batch's response.
   */
  async apply(changes: ApplyRequest_Change[], opts: CallOptions & ApplyOptions = {}): Promise<ApplyResult<ApplyResponse>> {
    return applyInBatches(
      changes,
      (batch) =>
        this.withRetry('applying journal specs', opts, (deadline) =>
          unaryCall<ApplyResponse>(
            (md, o, cb) => this.pool.journal().apply({ changes: batch }, md, o, cb),
            this.pool.metadata(claimsFor.journalApply()),
            { signal: opts.signal, deadline },
          ),
        ),
      { what: 'applying journal specs', statusError: (status, context) => new BrokerStatusError(status, context) },
      opts,
    );
  }

  // ---- ListFragments / FragmentStoreHealth ----------------------------------------------------

  /** Lists a journal's fragments (its broker's cover set), following pages to the end. */
  async listFragments(journal: string, opts: ListFragmentsOptions = {}): Promise<FragmentsResponse__Fragment[]> {
    const out: FragmentsResponse__Fragment[] = [];
    let token = 0n;
    const deadline = opts.timeoutMs !== undefined ? Date.now() + opts.timeoutMs : undefined;
    do {
      const res = await this.withRetry(
        `listing fragments of ${journal}`,
        { signal: opts.signal, timeoutMs: deadline !== undefined ? Math.max(deadline - Date.now(), 1) : undefined },
        async (dl) => {
          const endpoint = this.endpointFor(journal, false);
          const r = await unaryCall<FragmentsResponse>(
            (md, o, cb) =>
              this.pool.journal(endpoint).listFragments(
                {
                  header: undefined,
                  journal,
                  begin_mod_time: BigInt(opts.beginModTime ?? 0),
                  end_mod_time: BigInt(opts.endModTime ?? 0),
                  next_page_token: token,
                  page_limit: opts.pageLimit ?? 0,
                  signatureTTL: opts.signatureTTLms !== undefined ? nanosToDuration(BigInt(Math.round(opts.signatureTTLms)) * 1_000_000n) : undefined,
                  do_not_proxy: endpoint !== undefined,
                },
                md,
                o,
                cb,
              ),
            this.pool.metadata(claimsFor.journalFragments(journal)),
            { signal: opts.signal, deadline: dl },
          ).catch((err: unknown) => {
            if (endpoint !== undefined) this.forgetRoute(journal);
            throw err;
          });
          if (r.status !== Status.OK) {
            if (isTransientBrokerStatus(r.status)) {
              if (r.header?.route?.members.length) this.noteRoute(journal, r.header.route);
              else this.forgetRoute(journal);
            }
            throw new BrokerStatusError(r.status, `listing fragments of ${journal}`);
          }
          return r;
        },
        { more: (e) => e instanceof BrokerStatusError && isTransientBrokerStatus(e.status), maxAttempts: FAIL_FAST_ATTEMPTS },
      );
      for (const f of res.fragments) out.push(f);
      token = res.next_page_token;
    } while (token !== 0n);
    return out;
  }

  /**
   * Asks a broker to check a fragment store. Resolves with the response when the status is OK
   * or FRAGMENT_STORE_UNHEALTHY (then `store_health_error` says why); other statuses throw.
   * `checkDeletePrefix` (empty, or ending in `/`) also probes delete permission under that prefix
   * (empty: the store root); brokers that predate the probe ignore it.
   */
  async fragmentStoreHealth(store: string, checkDeletePrefix?: string, opts: CallOptions = {}): Promise<FragmentStoreHealthResponse> {
    const res = await this.withRetry(
      'checking fragment store health',
      opts,
      (deadline) =>
        unaryCall<FragmentStoreHealthResponse>(
          (md, o, cb) =>
            this.pool.journal().fragmentStoreHealth(
              { fragment_store: store, check_delete: checkDeletePrefix !== undefined, check_delete_prefix: checkDeletePrefix ?? '' },
              md,
              o,
              cb,
            ),
          this.pool.metadata(claimsFor.journalStoreHealth()),
          { signal: opts.signal, deadline },
        ),
      { maxAttempts: FAIL_FAST_ATTEMPTS },
    );
    if (res.status !== Status.OK && res.status !== Status.FRAGMENT_STORE_UNHEALTHY) {
      throw new BrokerStatusError(res.status, `checking fragment store ${store}`, res.store_health_error || undefined);
    }
    return res;
  }

  // ---- Read / Append --------------------------------------------------------------------------

  /**
   * A retrying Reader of `req.journal` from `req.offset` (default 0; -1 = the write head). With
   * a route cache, reads go to a route member with `do_not_proxy` and persisted fragments are
   * fetched directly from their stores.
   */
  read(req: Partial<ReadRequest> & { journal: string }, opts: ReaderOptions = {}): Reader {
    const full: ReadRequest = {
      header: undefined,
      journal: req.journal,
      offset: req.offset ?? 0n,
      block: req.block ?? false,
      do_not_proxy: req.do_not_proxy ?? this.routes !== undefined,
      metadata_only: req.metadata_only ?? false,
      end_offset: req.end_offset ?? 0n,
      begin_mod_time: req.begin_mod_time ?? 0n,
      min_etcd_revision: req.min_etcd_revision ?? 0n,
    };
    const onRetry = opts.onRetry ?? (this.opts.onRetry ? (i: { journal: string; attempt: number; delayMs: number; error: unknown }) => this.opts.onRetry!({ op: `reading ${i.journal}`, ...i }) : undefined);
    return new Reader(this, full, { delay: this.opts.delay, ...opts, onRetry });
  }

  /** @internal Starts a Read RPC for a Reader. */
  openRead(req: ReadRequest): { call: ClientReadableStream<ReadResponse>; direct: boolean } {
    const journal = req.journal.split(';')[0]!;
    const endpoint = this.endpointFor(journal, false);
    const md = this.pool.metadata(claimsFor.journalRead(req.journal));
    const call = this.pool
      .journal(endpoint)
      .makeServerStreamRequest(JournalService.read.path, JournalService.read.requestSerialize, decodeReadResponse, req, md, {});
    return { call, direct: endpoint !== undefined };
  }

  /** An Appender for one atomic append to `journal` (sent to its primary when the route is known). */
  append(journal: string, opts: AppendOptions = {}): Appender {
    return new Appender(this, journal, opts);
  }

  /** @internal Starts an Append RPC for an Appender. */
  openAppend(
    journal: string,
    cb: (err: ServiceError | null, res?: AppendResponse) => void,
  ): { call: ClientWritableStream<AppendRequest | AppendContent>; direct: boolean } {
    const endpoint = this.endpointFor(journal, true);
    const md = this.pool.metadata(claimsFor.journalAppend(journal));
    const call = this.pool
      .journal(endpoint)
      .makeClientStreamRequest<AppendRequest | AppendContent, AppendResponse>(
        JournalService.append.path,
        encodeAppendMessage,
        JournalService.append.responseDeserialize,
        md,
        {},
        cb,
      );
    return { call, direct: endpoint !== undefined };
  }
}
