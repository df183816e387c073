// JournalClient: a routed, retrying client of the protocol.Journal service (its List, Apply, Read,
// Append, ListFragments and FragmentStoreHealth RPCs). Wraps the generated grpc-js stub; every
// RPC goes through the shared call path of ServiceClient (call.ts).
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
import { decodeFragmentsResponse, decodeListResponse } from '../protocol/fast-decode.js';
import { encodeApplyRequestFast } from '../protocol/fast-encode.js';
import { applyInBatches, type ApplyOptions, type ApplyResult } from './apply.js';
import { journalPlanSubject } from './plan.js';
import { nanosToDuration } from '../protocol/duration.js';
import { BrokerStatusError, GazctlError, TransportError } from '../protocol/errors.js';
import { Appender, type AppendOptions, type AppendTransport } from './appender.js';
import { claimsFor } from './auth.js';
import { ServiceClient, type CallDefaults } from './call.js';
import type { ConnectionPool, ServiceConfig } from './dial.js';
import { Reader, type ReaderOptions, type ReadTransport } from './reader.js';
import { abortError, backoff, grpcCode, isTransientBrokerStatus, isTransientStreamCode, sleep } from './retry.js';
import { JournalWatch } from './watch.js';
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

export interface JournalClientOptions extends CallDefaults {
  /** Share connections with other clients. */
  pool?: ConnectionPool;
  /** Local directory rooting file:// fragment stores for direct reads. */
  fileRoot?: string;
  /** Overrides the backoff schedule (tests); same as `retry.delay`. */
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
  /**
   * Without `pageLimit`: after a first page of the server's default size, ask for pages as large
   * as the broker allows (10,000 fragments) while they stay near 4 MiB by the first page's longest
   * entry. A long log then takes a tenth of the round trips (100,000 fragments: 11 instead of 100).
   */
  largePages?: boolean;
}

/** The largest page a broker serves (brokers refuse a larger PageLimit). */
export const MAX_FRAGMENTS_PAGE = 10_000;
/** What a page of `largePages` is kept near, well under the 16 MiB a response may take. */
const LARGE_PAGE_BYTES = 4 * 1024 * 1024;

/**
 * The page limit that keeps pages of entries like `page`'s near LARGE_PAGE_BYTES: each entry's
 * strings (at most three UTF-8 bytes per UTF-16 unit) plus its numbers, sum and framing (under 100
 * bytes), by the longest entry of the page.
 */
export function largePageLimit(page: readonly FragmentsResponse__Fragment[]): number {
  let longest = 0;
  for (const f of page) {
    const s = f.spec;
    const chars = f.signed_url.length + (s ? s.journal.length + s.backing_store.length + s.path_postfix.length : 0);
    if (chars > longest) longest = chars;
  }
  return Math.max(1, Math.min(MAX_FRAGMENTS_PAGE, Math.floor(LARGE_PAGE_BYTES / (3 * longest + 100))));
}

/** The deserializer of Apply responses (the generated one). */
const decodeApplyResponse = (b: Buffer): ApplyResponse => JournalService.apply.responseDeserialize(b);

/** The serializer of a request that is already encoded. */
const passBytes = (b: Buffer): Buffer => b;

/** Attempts for RPCs that Go's gazctl makes fail-fast (ListFragments, FragmentStoreHealth). */
const FAIL_FAST_ATTEMPTS = 5;

export class JournalClient extends ServiceClient implements ReadTransport, AppendTransport {
  readonly fileRoot: string | undefined;

  /**
   * `opts` holds the connection sharing and direct-read settings and the default call options
   * (time budget, signal, retry policy, onRetry) that every call starts from.
   */
  constructor(config: ServiceConfig, opts: JournalClientOptions = {}) {
    const { pool, fileRoot, delay, ...defaults } = opts;
    super(config, 'broker', pool, delay ? { ...defaults, retry: { delay, ...defaults.retry } } : defaults);
    this.fileRoot = fileRoot;
  }

  private withRetry<T>(
    op: string,
    opts: CallOptions,
    fn: (deadline: number | undefined) => Promise<T>,
    extra: { more?: (err: unknown) => boolean; maxAttempts?: number } = {},
  ): Promise<T> {
    return this.invoke(op, opts, (deadline) => fn(deadline), extra);
  }

  // ---- List / watch ---------------------------------------------------------------------------

  private openList(req: ListRequest, deadline?: number): ClientReadableStream<ListResponse> {
    const md = this.pool.metadata(claimsFor.journalList(req.selector));
    return this.pool
      .journal()
      .makeServerStreamRequest(JournalService.list.path, JournalService.list.requestSerialize, decodeListResponse, req, md, deadline !== undefined ? { deadline } : {});
  }

  /** Lists journals matching `selector`, merging the streamed snapshot into one response. */
  async list(selector: LabelSelector, opts: CallOptions = {}): Promise<ListResponse> {
    const res = await this.invoke('listing journals', opts, (deadline, signal) => this.listOnce(selector, deadline, signal));
    for (const j of res.journals) if (j.spec) this.noteRoute(j.spec.name, j.route);
    return res;
  }

  private async listOnce(selector: LabelSelector, deadline: number | undefined, signal?: AbortSignal): Promise<ListResponse> {
    if (signal?.aborted) throw abortError(signal);
    const call = this.openList({ selector, watch: false, watch_resume: undefined }, deadline);
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
   * Ends cleanly when the signal aborts; throws BrokerStatusError on a non-OK status. With
   * `resume`, only snapshots newer than that header are yielded. The watch itself has no time
   * budget (see {@link watchJournals} for one that bounds the first snapshot).
   */
  async *watch(
    selector: LabelSelector,
    opts: Omit<CallOptions, 'timeoutMs'> & { resume?: Header } = {},
  ): AsyncGenerator<ListResponse, void, undefined> {
    const { signal, retry, onRetry } = this.callOptions({ ...opts, timeoutMs: 0 });
    let resume: Header | undefined = opts.resume;
    let attempt = 0;
    const delayFor = retry?.delay ?? backoff;
    while (!signal?.aborted) {
      const call = this.openList({ selector, watch: true, watch_resume: resume });
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
      onRetry?.({ op: 'watching journals', attempt, delayMs: ms, error: failure ?? new GazctlError('watch stream closed') });
      attempt++;
      try {
        await sleep(ms, signal);
      } catch {
        return;
      }
    }
  }

  /**
   * A watched listing of `selector`: the current snapshot, kept up to date, with change
   * notifications. The first snapshot is a List bounded by the call's time budget (so an
   * unreachable service fails within it); later ones come from a watch that retries by itself.
   */
  watchJournals(selector: LabelSelector, opts: CallOptions = {}): JournalWatch {
    return new JournalWatch(this, selector, opts);
  }

  // ---- Apply ----------------------------------------------------------------------------------

  /**
   * Applies `changes` in batches of `maxTxnSize` (0 or absent: one request), in order, with up
   * to `parallel` (default 1) in flight at once; the first failing batch stops the run with an
   * ApplyError once those in flight have answered. Batches that name the same journal are never in
   * flight together. Returns the highest etcd revision, the number of batches and the last
   * batch's response.
   */
  async apply(changes: ApplyRequest_Change[], opts: CallOptions & ApplyOptions = {}): Promise<ApplyResult<ApplyResponse>> {
    return applyInBatches<ApplyRequest_Change, ApplyResponse, Buffer | undefined>(
      changes,
      (batch, encoded) =>
        this.withRetry('applying journal specs', opts, (deadline) =>
          unaryCall<ApplyResponse>(
            (md, o, cb) => {
              // A batch the fast encoder took goes out as its bytes; any other goes through the
              // generated serializer, which encodes it or fails the call as it always did.
              if (!encoded) return this.pool.journal().apply({ changes: batch }, md, o, cb);
              return this.pool.journal().makeUnaryRequest(JournalService.apply.path, passBytes, decodeApplyResponse, encoded, md, o, (err, res) => cb(err, res!));
            },
            this.pool.metadata(claimsFor.journalApply()),
            { signal: opts.signal, deadline },
          ),
        ),
      { what: 'applying journal specs', statusError: (status, context) => new BrokerStatusError(status, context), itemName: journalPlanSubject.changeName },
      opts,
      // Each batch is encoded while the previous one is in flight.
      (batch): Buffer | undefined => encodeApplyRequestFast({ changes: batch }),
    );
  }

  // ---- ListFragments / FragmentStoreHealth ----------------------------------------------------

  /**
   * Lists a journal's fragments (its broker's cover set), following pages to the end. Pages are
   * decoded by the hand-written decoder (fast-decode.ts), as journal listings are.
   */
  async listFragments(journal: string, opts: ListFragmentsOptions = {}): Promise<FragmentsResponse__Fragment[]> {
    const { beginModTime, endModTime, signatureTTLms, pageLimit, largePages, ...call } = opts;
    const o = this.callOptions(call);
    const out: FragmentsResponse__Fragment[] = [];
    let token = 0n;
    let limit = pageLimit ?? 0;
    // One time budget for every page.
    const deadline = o.timeoutMs !== undefined ? Date.now() + o.timeoutMs : undefined;
    do {
      const res = await this.unary<FragmentsResponse>(
        {
          op: `listing fragments of ${journal}`,
          claims: claimsFor.journalFragments(journal),
          route: { item: journal, primary: false },
          start: (d, md, go, cb) =>
            this.pool.journal(d.endpoint).makeUnaryRequest(
              JournalService.listFragments.path,
              JournalService.listFragments.requestSerialize,
              decodeFragmentsResponse,
              {
                header: undefined,
                journal,
                begin_mod_time: BigInt(beginModTime ?? 0),
                end_mod_time: BigInt(endModTime ?? 0),
                next_page_token: token,
                page_limit: limit,
                signatureTTL: signatureTTLms !== undefined ? nanosToDuration(BigInt(Math.round(signatureTTLms)) * 1_000_000n) : undefined,
                do_not_proxy: d.direct,
              },
              md,
              go,
              // grpc-js gives a response with every success.
              (err, res) => cb(err, res as FragmentsResponse),
            ),
          status: (r) => ({ status: r.status, header: r.header }),
          statusError: (st) => new BrokerStatusError(st, `listing fragments of ${journal}`),
          retryStatus: (st) => isTransientBrokerStatus(st),
          maxAttempts: FAIL_FAST_ATTEMPTS,
        },
        { ...o, timeoutMs: deadline !== undefined ? Math.max(deadline - Date.now(), 1) : 0 },
      );
      for (const f of res.fragments) out.push(f);
      token = res.next_page_token;
      if (largePages && pageLimit === undefined && limit === 0 && res.fragments.length > 0) limit = largePageLimit(res.fragments);
    } while (token !== 0n);
    return out;
  }

  /**
   * Asks a broker to check a fragment store. Resolves with the response when the status is OK
   * or FRAGMENT_STORE_UNHEALTHY (then `store_health_error` says why); other statuses throw.
   * `checkDeletePrefix` (empty, or ending in `/`) also probes delete permission under that prefix
   * (empty: the store root); brokers that predate the probe ignore it.
   */
  fragmentStoreHealth(store: string, checkDeletePrefix?: string, opts: CallOptions = {}): Promise<FragmentStoreHealthResponse> {
    return this.unary<FragmentStoreHealthResponse>(
      {
        op: 'checking fragment store health',
        claims: claimsFor.journalStoreHealth(),
        start: (d, md, o, cb) =>
          this.pool
            .journal(d.endpoint)
            .fragmentStoreHealth({ fragment_store: store, check_delete: checkDeletePrefix !== undefined, check_delete_prefix: checkDeletePrefix ?? '' }, md, o, cb),
        status: (r) => ({ status: r.status, header: r.header }),
        accept: (st) => st === Status.OK || st === Status.FRAGMENT_STORE_UNHEALTHY,
        statusError: (st, r) => new BrokerStatusError(st, `checking fragment store ${store}`, r.store_health_error || undefined),
        maxAttempts: FAIL_FAST_ATTEMPTS,
      },
      opts,
    );
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
    // Reads retry by themselves with no time budget; the defaults give their signal and schedule.
    const d = this.callOptions({ signal: opts.signal });
    const onRetry =
      opts.onRetry ?? (d.onRetry ? (i: { journal: string; attempt: number; delayMs: number; error: unknown }) => d.onRetry!({ op: `reading ${i.journal}`, ...i }) : undefined);
    return new Reader(this, full, { delay: d.retry?.delay, ...opts, signal: d.signal, onRetry });
  }

  /** @internal Starts a Read RPC for a Reader. */
  openRead(req: ReadRequest): { call: ClientReadableStream<ReadResponse>; direct: boolean } {
    const { endpoint, direct } = this.dispatch(req.journal.split(';')[0]!, false);
    const md = this.pool.metadata(claimsFor.journalRead(req.journal));
    const call = this.pool
      .journal(endpoint)
      .makeServerStreamRequest(JournalService.read.path, JournalService.read.requestSerialize, decodeReadResponse, req, md, {});
    return { call, direct };
  }

  /** An Appender for one atomic append to `journal` (sent to its primary when the route is known). */
  append(journal: string, opts: AppendOptions = {}): Appender {
    const signal = this.callOptions({ signal: opts.signal }).signal;
    return new Appender(this, journal, { ...opts, signal });
  }

  /** @internal Starts an Append RPC for an Appender. */
  openAppend(
    journal: string,
    cb: (err: ServiceError | null, res?: AppendResponse) => void,
  ): { call: ClientWritableStream<AppendRequest | AppendContent>; direct: boolean } {
    const { endpoint, direct } = this.dispatch(journal, true);
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
    return { call, direct };
  }
}
