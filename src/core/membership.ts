// A member's registration, shared by brokers and consumers: its member key
// `R/members/<zone>#<suffix>` (a BrokerSpec or a ConsumerSpec, encoded by the caller) under an
// etcd lease kept alive by the keyspace client. When the lease is lost (etcd unreachable for a
// whole TTL, or the process was paused past it) the member stops counting as registered, so the
// daemon stops acting as primary, and keeps trying to register again: under the lease it had
// when etcd still holds it (so its assignments stay), else under a fresh one. It never exits
// because of etcd.

import type { Keyspace, Lease } from '../lib/keyspace/index.js';
import { memberKey } from '../lib/keyspace/keys.js';
import type { ProcessSpec_ID } from '../lib/protocol/gen/broker/protocol.js';
import type { Logger } from './log.js';

/** Encodes this member's spec (BrokerSpec, ConsumerSpec) for its item limit and exiting flag. */
export type MemberSpecEncoder = (spec: { id: ProcessSpec_ID; endpoint: string; limit: number; exiting: boolean }) => Uint8Array;

export class Membership {
  readonly key: string;
  private lease: Lease | undefined;
  private spec: { id: ProcessSpec_ID; endpoint: string; limit: number; exiting: boolean };
  private stopped = false;
  private readonly listeners = new Set<(registered: boolean) => void>();
  private registering: Promise<void> | undefined;

  constructor(
    private readonly ks: Keyspace,
    root: string,
    readonly id: ProcessSpec_ID,
    endpoint: string,
    limit: number,
    private readonly ttlSeconds: number,
    private readonly log: Logger,
    private readonly encode: MemberSpecEncoder,
  ) {
    this.key = memberKey(root, id);
    this.spec = { id, endpoint, limit, exiting: false };
  }

  /** The lease id while registered (for keys that live as long as this member). */
  get leaseId(): bigint | undefined {
    return this.lease && !this.lease.lost ? this.lease.id : undefined;
  }

  get registered(): boolean {
    return this.leaseId !== undefined;
  }

  get exiting(): boolean {
    return this.spec.exiting;
  }

  onRegistration(fn: (registered: boolean) => void): void {
    this.listeners.add(fn);
  }

  /** Register once (rejects on an etcd error); later losses re-register in the background. */
  async start(): Promise<void> {
    await this.register();
  }

  private async register(): Promise<void> {
    const opts = {
      onLost: (err: Error) => {
        if (this.stopped) return;
        this.log.warn('etcd lease lost; no longer acting for this member until registered again', { err: err.message });
        for (const l of this.listeners) l(false);
        this.reRegister();
      },
    };
    // After a lapse, take up the lease we had when etcd still holds it (see resumeLease): our
    // assignments live under it. With a fresh lease they would all expire together with the old
    // one a few seconds later, and when every member of a route loses its assignment at once
    // the journal comes back on new spools at offset 0 while its stores hold content beyond:
    // INDEX_HAS_GREATER_OFFSET until an operator resets the head.
    const previous = this.lease;
    let lease = previous && previous.lost ? await this.ks.resumeLease(previous.id, opts) : undefined;
    const resumed = lease !== undefined;
    if (!lease) {
      if (previous) this.log.info('etcd no longer holds our previous lease; registering with a new one', { lease: previous.id.toString(16) });
      lease = await this.ks.grantLease(this.ttlSeconds, opts);
    }
    try {
      await this.ks.put(this.key, Buffer.from(this.encode(this.spec)), { lease: lease.id });
    } catch (e) {
      // A resumed lease carries our assignments: leave it to expire rather than revoke it.
      if (resumed) lease.close();
      else await lease.revoke().catch(() => false);
      throw e;
    }
    this.lease = lease;
    this.log.info(resumed ? 'registered member again under its previous lease' : 'registered member', { key: this.key, lease: lease.id.toString(16) });
    for (const l of this.listeners) l(true);
  }

  private reRegister(): void {
    if (this.registering || this.stopped) return;
    this.registering = (async () => {
      let delay = 250;
      while (!this.stopped) {
        try {
          await this.register();
          return;
        } catch (e) {
          this.log.warn('registering member failed; retrying', { err: (e as Error).message });
          await new Promise((r) => setTimeout(r, delay));
          delay = Math.min(delay * 2, 2000);
        }
      }
    })().finally(() => (this.registering = undefined));
  }

  /** Mark this member as exiting (limit 0), so the allocator moves its items away. */
  async setExiting(): Promise<void> {
    this.spec = { ...this.spec, limit: 0, exiting: true };
    const id = this.leaseId;
    if (id !== undefined) await this.ks.put(this.key, Buffer.from(this.encode(this.spec)), { lease: id });
  }

  /** Revoke the lease: the member key and this member's assignments go at once. */
  async stop(): Promise<void> {
    this.stopped = true;
    const lease = this.lease;
    this.lease = undefined;
    if (lease && !lease.lost) await lease.revoke().catch(() => false);
  }
}
