// A granted etcd lease and the loop that keeps it alive.
//
// Keep-alives go over one LeaseKeepAlive stream, one request at a time, every third of the TTL.
// A transport error drops the stream and the next attempt opens a new one, a few times a second,
// for as long as the lease can still be alive: it is declared lost when etcd answers a keep-alive
// with TTL 0 (expired or revoked) or when no keep-alive has succeeded for a whole TTL (measured
// from when the last successful request was sent, so we never think a lease alive that etcd has
// already expired).
import type { ILeaseKeepAliveRequest, ILeaseKeepAliveResponse, IDuplexStream } from 'etcd3';

import { GazctlError } from '../protocol/errors.js';
import { sleep } from '../concurrency.js';
import type { Keyspace } from './client.js';

/** The lease expired, was revoked elsewhere, or could not be kept alive for a whole TTL. */
export class LeaseLostError extends GazctlError {}

export interface LeaseOptions {
  /** Called once when the lease is lost (not when it is revoked or closed through this object). */
  onLost?: (err: LeaseLostError) => void;
  /** Keep-alive interval; default a third of the TTL. */
  keepAliveIntervalMs?: number;
}

type KeepAliveStream = IDuplexStream<ILeaseKeepAliveRequest, ILeaseKeepAliveResponse>;

export class Lease {
  private readonly stop = new AbortController();
  private lostError: LeaseLostError | undefined;
  private stream: KeepAliveStream | undefined;
  private waiter: ((r: ILeaseKeepAliveResponse | Error) => void) | undefined;
  /** Resolves once keep-alives have stopped (lost, revoked or closed). */
  readonly ended: Promise<void>;

  /** @internal Use {@link Keyspace.grantLease}. */
  constructor(
    private readonly ks: Keyspace,
    /** The lease id, to attach keys to (`put(key, value, { lease: lease.id })`). */
    readonly id: bigint,
    /** TTL granted by etcd, in seconds. */
    readonly ttlSeconds: number,
    private readonly opts: LeaseOptions,
    /** How long etcd is known to keep the lease from now without a keep-alive (default: the TTL). */
    private readonly aliveForMs: number = ttlSeconds * 1000,
  ) {
    this.ended = this.keepAlive();
  }

  /** The reason, once the lease is lost. */
  get lost(): LeaseLostError | undefined {
    return this.lostError;
  }

  /** Aborted when keep-alives stop for any reason. */
  get signal(): AbortSignal {
    return this.stop.signal;
  }

  private async keepAlive(): Promise<void> {
    const ttlMs = this.ttlSeconds * 1000;
    const interval = this.opts.keepAliveIntervalMs ?? Math.max(200, Math.floor(ttlMs / 3));
    let aliveUntil = Date.now() + this.aliveForMs;
    let lastError = '';
    try {
      while (!this.stop.signal.aborted) {
        const sent = Date.now();
        let r: ILeaseKeepAliveResponse | Error;
        try {
          r = await this.once(Math.min(interval, Math.max(100, aliveUntil - sent)));
        } catch (e) {
          r = e as Error;
        }
        if (this.stop.signal.aborted) return;
        if (r instanceof Error) {
          lastError = r.message;
          this.dropStream();
          if (Date.now() >= aliveUntil) {
            this.markLost(`no keep-alive succeeded for ${this.ttlSeconds}s (last error: ${lastError})`);
            return;
          }
          await sleep(Math.min(250, Math.max(0, aliveUntil - Date.now())), this.stop.signal).catch(stopped);
          continue;
        }
        const ttl = Number(r.TTL);
        if (!(ttl > 0)) {
          this.markLost('etcd reports the lease expired or revoked');
          return;
        }
        aliveUntil = sent + ttl * 1000;
        await sleep(interval, this.stop.signal).catch(stopped);
      }
    } finally {
      this.dropStream();
      this.stop.abort();
    }
  }

  /** One keep-alive round-trip, failing after `timeoutMs`. */
  private async once(timeoutMs: number): Promise<ILeaseKeepAliveResponse> {
    if (!this.stream) {
      const s = await this.ks.rpc.leaseClient.leaseKeepAlive();
      // Events of a stream we have dropped already are ignored.
      s.on('data', (r) => this.stream === s && this.settle(r));
      s.on('error', (e) => this.stream === s && this.settle(e));
      s.on('end', () => this.stream === s && this.settle(new Error('keep-alive stream ended')));
      this.stream = s;
    }
    const stream = this.stream;
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => {
        this.waiter = undefined;
        reject(new Error(`keep-alive unanswered after ${timeoutMs} ms`));
      }, timeoutMs);
      this.waiter = (r) => {
        clearTimeout(t);
        this.waiter = undefined;
        if (r instanceof Error) reject(r);
        else resolve(r);
      };
      stream.write({ ID: this.id.toString() });
    });
  }

  private settle(r: ILeaseKeepAliveResponse | Error): void {
    if (r instanceof Error) this.stream = undefined;
    this.waiter?.(r);
  }

  private dropStream(): void {
    const s = this.stream;
    this.stream = undefined;
    if (s) {
      try {
        s.cancel();
      } catch {
        // already gone
      }
    }
  }

  private markLost(why: string): void {
    if (this.lostError || this.stop.signal.aborted) return;
    this.lostError = new LeaseLostError(`etcd lease ${this.id.toString(16)} lost: ${why}`);
    this.stop.abort();
    this.opts.onLost?.(this.lostError);
  }

  /** Stop keeping the lease alive; it expires after its TTL. */
  close(): void {
    this.stop.abort();
    this.dropStream();
  }

  /** Stop keeping the lease alive and revoke it, deleting its keys at once. */
  async revoke(): Promise<boolean> {
    this.close();
    await this.ended;
    return this.ks.revokeLease(this.id);
  }
}

/** A sleep of a loop that checks its signal itself rejects only when stopped: nothing to do. */
function stopped(): void {}
