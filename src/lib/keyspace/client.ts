// A small etcd v3 client for Gazette's keyspace, on the `etcd3` package's gRPC stubs: single
// reads, prefix ranges (paged, at one revision), puts, deletes, transactions with compares,
// leases with keep-alive (lease.ts) and prefix watches that never give up (watch.ts).
//
// We use etcd3 for its generated RPC layer and connection handling only. Its own retry and
// circuit-breaker policies are replaced by a pass-through: a failed call fails at once, with
// a KeyspaceError, and the long-lived parts (watches, keep-alives) do their own retrying, so a
// 15 s outage is ridden out instead of tripping a breaker that keeps us away afterwards.
import {
  Etcd3,
  GRPCUnavailableError,
  type ICompare,
  type IDuplexStream,
  type IOptions,
  type IRequestOp,
  type IWatchRequest,
  type IWatchResponse,
} from 'etcd3';

import { GazctlError } from '../protocol/errors.js';
import { big, decodeKv, prefixRangeEnd, type KeyValue } from './kv.js';
import { Lease, type LeaseOptions } from './lease.js';
import { PrefixWatch, type WatchPrefixOptions } from './watch.js';
import { openWatchStream as openRawWatchStream } from './etcd3-internals.js';
import { etcdEndpointsSecure, etcdTlsHint, type EtcdTls } from './tls.js';

/** An etcd call failed (transport, deadline, or an error reported by etcd). */
export class KeyspaceError extends GazctlError {}

export interface KeyspaceOptions {
  /** etcd client URLs, `http://host:port`, or `https://host:port` for TLS (all alike). */
  endpoints: string | string[];
  /**
   * CA and client certificate for `https://` endpoints (see tls.ts, `loadEtcdTls`); ignored for
   * `http://` ones. Without it, https endpoints are verified against the system roots.
   */
  tls?: EtcdTls;
  /** Deadline of each unary call. Default 5 s. */
  callTimeoutMs?: number;
  /** Closes the client (and its watches and keep-alives) when aborted. */
  signal?: AbortSignal;
  /** Debug lines (which Watch stream path is in use, once); none by default. */
  debug?: (msg: string, fields: Record<string, unknown>) => void;
}

/** A condition of a transaction, on one key. */
export type Compare =
  | { key: string; target: 'modRevision' | 'createRevision' | 'version' | 'lease'; result?: CompareResult; value: bigint }
  | { key: string; target: 'value'; result?: CompareResult; value: string | Buffer };
export type CompareResult = '=' | '!=' | '<' | '>';

/** An operation of a transaction. */
export type TxnOp =
  | { put: string; value: string | Buffer; lease?: bigint; /** Keep the key's current lease (etcd's ignore_lease). */ ignoreLease?: boolean }
  | { delete: string }
  | { deletePrefix: string };

export interface TxnResult {
  succeeded: boolean;
  /** Revision of the store after the transaction (unchanged when it only read or failed without writes). */
  revision: bigint;
}

export interface RangeResult {
  kvs: KeyValue[];
  /** The revision the range was read at. */
  revision: bigint;
}

const COMPARE_RESULT = { '=': 'Equal', '!=': 'NotEqual', '<': 'Less', '>': 'Greater' } as const;
const COMPARE_TARGET = { modRevision: 'Mod', createRevision: 'Create', version: 'Version', lease: 'Lease', value: 'Value' } as const;
const COMPARE_FIELD = { modRevision: 'mod_revision', createRevision: 'create_revision', version: 'version', lease: 'lease' } as const;

type Policy = NonNullable<NonNullable<IOptions['faultHandling']>['global']>;

/** A fault-handling policy that runs the call once and lets its error through. */
function passThroughPolicy(): Policy {
  const noEvent = () => ({ dispose() {} });
  const policy = {
    onSuccess: noEvent,
    onFailure: noEvent,
    execute<T>(fn: (ctx: { signal: AbortSignal }) => PromiseLike<T> | T, signal?: AbortSignal): Promise<T> {
      return Promise.resolve().then(() => fn({ signal: signal ?? new AbortController().signal }));
    },
  };
  return policy as unknown as Policy;
}

/** Whether `e` is etcd (or the channel to it) answering UNAVAILABLE, gRPC code 14. */
function isUnavailable(e: unknown): boolean {
  return e instanceof GRPCUnavailableError || (e as { code?: unknown } | undefined)?.code === 14;
}

/** One line: grpc-js' details may hold OpenSSL's multi-line reason and an empty resolver note. */
function describe(e: unknown): string {
  const msg = (e instanceof Error ? e.message : String(e)).replace(/\.?\s*Resolution note:\s*$/s, '').replace(/\s+/g, ' ').trim();
  return msg + etcdTlsHint(msg);
}

export class Keyspace {
  /** @internal The etcd3 client: its `kv`, `leaseClient` and `watchClient` stubs. */
  readonly rpc: Etcd3;
  readonly endpoints: readonly string[];
  private readonly owned = new Set<{ close(): unknown }>();
  private readonly closer = new AbortController();
  private closed = false;
  private readonly debug: KeyspaceOptions['debug'];
  private watchPathTold = false;
  private readonly timeoutMs: number;

  constructor(opts: KeyspaceOptions) {
    this.debug = opts.debug;
    const endpoints = typeof opts.endpoints === 'string' ? [opts.endpoints] : [...opts.endpoints];
    if (endpoints.length === 0) throw new KeyspaceError('no etcd endpoints given');
    this.endpoints = endpoints;
    const timeout = opts.callTimeoutMs ?? 5000;
    this.timeoutMs = timeout;
    const policy = passThroughPolicy();
    const secure = etcdEndpointsSecure(endpoints);
    this.rpc = new Etcd3({
      hosts: endpoints,
      // etcd3 hands these to grpc-js' createSsl, where a missing CA means the system roots.
      ...(secure && opts.tls
        ? { credentials: { rootCertificate: opts.tls.ca as Buffer, ...(opts.tls.key ? { privateKey: opts.tls.key } : {}), ...(opts.tls.cert ? { certChain: opts.tls.cert } : {}) } }
        : {}),
      defaultCallOptions: (ctx) => (ctx.isStream ? {} : { deadline: Date.now() + timeout }),
      faultHandling: { host: () => policy, global: policy },
      grpcOptions: {
        // Notice a silently dead connection within ~15 s. etcd's default server policy allows
        // pings every 5 s while a call is open and none without one.
        'grpc.keepalive_time_ms': 10_000,
        'grpc.keepalive_timeout_ms': 5_000,
        'grpc.keepalive_permit_without_calls': 0,
      },
    });
    if (opts.signal) {
      if (opts.signal.aborted) this.close();
      else opts.signal.addEventListener('abort', () => this.close(), { once: true });
    }
  }

  /** Aborted once the client is closed. @internal */
  get closeSignal(): AbortSignal {
    return this.closer.signal;
  }

  get isClosed(): boolean {
    return this.closed;
  }

  private async call<T>(what: string, fn: () => Promise<T>): Promise<T> {
    if (this.closed) throw new KeyspaceError(`etcd ${what}: the keyspace client is closed`);
    try {
      return await fn();
    } catch (e) {
      throw new KeyspaceError(`etcd ${what}: ${describe(e)}`, { cause: e });
    }
  }

  /**
   * A read, retried while etcd is UNAVAILABLE until the call timeout runs out, as etcd's Go client
   * retries its repeatable calls. After an etcd restart, grpc-js fails calls at once while the
   * channel waits out its reconnect backoff (UNAVAILABLE "No connection established"); a read has
   * no effect, so trying it again is safe. Writes are not retried: one may have been applied.
   */
  private async read<T>(what: string, fn: () => Promise<T>): Promise<T> {
    const deadline = Date.now() + this.timeoutMs;
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.call(what, fn);
      } catch (e) {
        const delay = Math.min(50 * 2 ** attempt, 500);
        if (this.closed || !isUnavailable((e as Error).cause) || Date.now() + delay >= deadline) throw e;
        await new Promise((resolve) => setTimeout(resolve, delay));
      }
    }
  }

  /** One key, or undefined when absent. */
  async get(key: string): Promise<KeyValue | undefined> {
    const r = await this.read(`get ${key}`, () => this.rpc.kv.range({ key: Buffer.from(key) }));
    const kv = r.kvs[0];
    return kv ? decodeKv(kv) : undefined;
  }

  /**
   * Every key starting with `prefix`, in key order, all read at one revision (the first page's
   * unless `revision` is given). Large prefixes are read `pageSize` keys at a time (default 1000).
   */
  async range(prefix: string, opts: { revision?: bigint; pageSize?: number } = {}): Promise<RangeResult> {
    const end = prefixRangeEnd(prefix);
    const limit = opts.pageSize ?? 1000;
    let start = Buffer.from(prefix);
    let revision = opts.revision;
    const kvs: KeyValue[] = [];
    for (;;) {
      const r = await this.read(`range ${prefix}`, () =>
        this.rpc.kv.range({ key: start, range_end: end, limit, revision: revision === undefined ? 0 : revision.toString() }),
      );
      revision ??= big(r.header.revision);
      for (const kv of r.kvs) kvs.push(decodeKv(kv));
      if (!r.more || r.kvs.length === 0) break;
      start = Buffer.concat([Buffer.from(r.kvs[r.kvs.length - 1]!.key), Buffer.from([0])]);
    }
    return { kvs, revision: revision ?? 0n };
  }

  /** The response header (cluster and member ids, raft term, revision) of a count-only read of `key`. */
  async header(key: string): Promise<{ cluster_id: string; member_id: string; revision: string; raft_term: string }> {
    const r = await this.read(`range ${key}`, () => this.rpc.kv.range({ key: Buffer.from(key), count_only: true }));
    return r.header;
  }

  /** The store's current revision. */
  async revision(): Promise<bigint> {
    const r = await this.read('revision', () => this.rpc.kv.range({ key: Buffer.from([0]), count_only: true }));
    return big(r.header.revision);
  }

  /** Put a key (attached to `lease` when given); resolves with the revision of the write. */
  async put(key: string, value: string | Buffer, opts: { lease?: bigint } = {}): Promise<bigint> {
    const r = await this.call(`put ${key}`, () =>
      this.rpc.kv.put({ key: Buffer.from(key), value: Buffer.from(value), lease: opts.lease?.toString() }),
    );
    return big(r.header.revision);
  }

  /** Delete one key; resolves with whether it existed. */
  async delete(key: string): Promise<boolean> {
    const r = await this.call(`delete ${key}`, () => this.rpc.kv.deleteRange({ key: Buffer.from(key) }));
    return big(r.deleted) > 0n;
  }

  /** Delete every key starting with `prefix`; resolves with the number deleted. */
  async deletePrefix(prefix: string): Promise<number> {
    const r = await this.call(`delete prefix ${prefix}`, () =>
      this.rpc.kv.deleteRange({ key: Buffer.from(prefix), range_end: prefixRangeEnd(prefix) }),
    );
    return Number(r.deleted);
  }

  /**
   * One transaction: when every compare holds, `success` runs, else `failure`. A compare of
   * `modRevision` (or `createRevision`) with 0 means "the key does not exist".
   */
  async txn(t: { compare?: Compare[]; success?: TxnOp[]; failure?: TxnOp[] }): Promise<TxnResult> {
    const r = await this.call('txn', () =>
      this.rpc.kv.txn({
        compare: (t.compare ?? []).map(toCompare),
        success: (t.success ?? []).map(toOp),
        failure: (t.failure ?? []).map(toOp),
      }),
    );
    return { succeeded: r.succeeded, revision: big(r.header.revision) };
  }

  /**
   * Compact the history up to `revision`: older revisions can no longer be read or watched
   * (a watch resuming below it resyncs instead).
   */
  async compact(revision: bigint): Promise<void> {
    await this.call(`compact ${revision}`, () => this.rpc.kv.compact({ revision: revision.toString(), physical: true }));
  }

  /**
   * Whether etcd answers a linearizable read (which needs a leader) within `timeoutMs`
   * (default 2 s). Never throws.
   */
  async healthy(timeoutMs = 2000): Promise<boolean> {
    if (this.closed) return false;
    try {
      await this.rpc.kv.range({ key: Buffer.from('health'), count_only: true }, { deadline: Date.now() + timeoutMs });
      return true;
    } catch {
      return false;
    }
  }

  /** Grant a lease of `ttlSeconds` and keep it alive until it is revoked, closed or lost. */
  async grantLease(ttlSeconds: number, opts: LeaseOptions = {}): Promise<Lease> {
    if (!Number.isInteger(ttlSeconds) || ttlSeconds < 1) throw new KeyspaceError(`lease TTL must be a whole number of seconds >= 1, got ${ttlSeconds}`);
    const r = await this.call('grant lease', () => this.rpc.leaseClient.leaseGrant({ TTL: ttlSeconds }));
    if (r.error) throw new KeyspaceError(`etcd grant lease: ${r.error}`);
    const lease = new Lease(this, big(r.ID), Number(r.TTL), opts);
    this.own(lease);
    return lease;
  }

  /**
   * Take up keeping alive a lease granted earlier (by id), if etcd still holds it: undefined when
   * etcd reports it expired or revoked. etcd gives every lease a fresh TTL when a leader takes
   * office (after a restart, for one), so a lease whose keep-alives failed for a whole TTL while
   * etcd was away may well be alive again once etcd is back.
   */
  async resumeLease(id: bigint, opts: LeaseOptions = {}): Promise<Lease | undefined> {
    let r;
    try {
      r = await this.call(`lease time-to-live ${id.toString(16)}`, () => this.rpc.leaseClient.leaseTimeToLive({ ID: id.toString() }));
    } catch (e) {
      // etcd answers TTL -1 for a lease it does not know; some versions may say so as an error.
      if (/lease not found/i.test(describe(e))) return undefined;
      throw e;
    }
    const remaining = Number(r.TTL);
    const granted = Number(r.grantedTTL);
    // TTL is -1 for a lease etcd does not know (any more); one that is about to expire is not
    // worth taking up either.
    if (!(remaining >= 1) || !(granted >= 1)) return undefined;
    // etcd rounds the remaining time down to whole seconds: it keeps the lease at least that long.
    const lease = new Lease(this, id, granted, opts, remaining * 1000);
    this.own(lease);
    return lease;
  }

  /**
   * Revoke a lease by id: every key attached to it is deleted at once, as when it expires.
   * Resolves false when etcd does not know the lease (expired or revoked already).
   */
  async revokeLease(id: bigint): Promise<boolean> {
    try {
      await this.call(`revoke lease ${id}`, () => this.rpc.leaseClient.leaseRevoke({ ID: id.toString() }));
      return true;
    } catch (e) {
      if (/lease not found/i.test(describe(e))) return false;
      throw e;
    }
  }

  /**
   * A raw Watch stream that etcd cancels when its member loses the raft leader (the
   * `hasleader` request metadata, as Go clients send it); see etcd3-internals.ts. @internal
   */
  async openWatchStream(): Promise<IDuplexStream<IWatchRequest, IWatchResponse>> {
    const { stream, path } = await openRawWatchStream(this.rpc);
    if (!this.watchPathTold) {
      this.watchPathTold = true;
      this.debug?.('etcd watch stream', { path, hasleader: path === 'hasleader' });
    }
    return stream;
  }

  /** Watch every key under `prefix`; see {@link PrefixWatch}. */
  watchPrefix(prefix: string, opts: WatchPrefixOptions): PrefixWatch {
    if (this.closed) throw new KeyspaceError(`etcd watch ${prefix}: the keyspace client is closed`);
    const w = new PrefixWatch(this, prefix, opts);
    this.own(w);
    return w;
  }

  private own(x: { close(): unknown; done?: Promise<unknown> }): void {
    this.owned.add(x);
    const forget = () => this.owned.delete(x);
    if (x instanceof Lease) void x.ended.then(forget);
    else if (x instanceof PrefixWatch) void x.done.then(forget, forget);
  }

  /** Stop every watch and keep-alive of this client (leases are left to expire) and disconnect. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.closer.abort();
    for (const x of this.owned) x.close();
    this.owned.clear();
    this.rpc.close();
  }
}

function toCompare(c: Compare): ICompare {
  const out: ICompare = {
    key: Buffer.from(c.key),
    target: COMPARE_TARGET[c.target],
    result: COMPARE_RESULT[c.result ?? '='],
  };
  if (c.target === 'value') out.value = Buffer.from(c.value);
  else out[COMPARE_FIELD[c.target]] = c.value.toString();
  return out;
}

function toOp(op: TxnOp): IRequestOp {
  if ('put' in op) {
    if (op.ignoreLease) return { request_put: { key: Buffer.from(op.put), value: Buffer.from(op.value), ignore_lease: true } };
    return { request_put: { key: Buffer.from(op.put), value: Buffer.from(op.value), lease: op.lease?.toString() } };
  }
  if ('deletePrefix' in op) {
    return { request_delete_range: { key: Buffer.from(op.deletePrefix), range_end: prefixRangeEnd(op.deletePrefix) } };
  }
  return { request_delete_range: { key: Buffer.from(op.delete) } };
}
