// The journals this broker holds: a Replica for every journal whose route includes this
// broker, created and dropped as the view changes. As primary, a journal whose assignments do
// not yet advertise the current route is "pulsed" (an empty round through the replication
// pipeline) and then advertised, which is what makes it consistent for the allocator.

import { spoolStats } from '../fragment/spool.js';
import { memberIndex } from '../../lib/protocol/route.js';
import type { JournalSpec } from '../../lib/protocol/gen/broker/protocol.js';
import type { Broker } from './broker.js';
import { advertised, pulse } from './primary.js';
import { Replica } from './replica.js';
import type { JournalEntry } from './view.js';

export class ReplicaSet {
  private readonly replicas = new Map<string, Replica>();
  private readonly pulsing = new Set<string>();
  private readonly retryAt = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
  private broker!: Broker;

  attach(b: Broker): void {
    this.broker = b;
    b.metrics.observeSpools(() => {
      let spool = 0n;
      let queued = 0;
      for (const r of this.replicas.values()) {
        spool += r.spool.contentLength;
        queued += r.spool.queuedWriteBytes;
      }
      return { spool: Number(spool), files: spoolStats.openFiles, disk: spoolStats.bytesOnDisk, queued, unpersisted: b.persister.pendingBytes };
    });
    b.view.onChange(() => this.sync());
    this.timer = setInterval(() => this.sync(), 1000);
    this.timer.unref();
  }

  get(name: string): Replica | undefined {
    return this.replicas.get(name);
  }

  /** The replica of `spec`, created when missing. */
  ensure(spec: JournalSpec): Replica {
    let r = this.replicas.get(spec.name);
    if (!r) {
      const b = this.broker;
      r = new Replica(spec, {
        openStore: (url) => b.openStore(url),
        persister: b.persister,
        fileOnly: b.config.fileOnly,
        log: b.log,
        onPersisted: () => b.metrics.persisted.inc(),
      });
      this.replicas.set(spec.name, r);
    } else r.updateSpec(spec);
    return r;
  }

  all(): Replica[] {
    return [...this.replicas.values()];
  }

  sync(): void {
    const b = this.broker;
    const self = b.resolver.self;
    const journals = b.view.journals();
    let primaries = 0;
    for (const [name, r] of this.replicas) {
      const j = journals.get(name);
      if (!j || memberIndex(j.route, self) < 0) {
        // Keep a replica with content that is not yet in a store until it is.
        if (r.spool.contentLength > 0n || r.pendingPersists > 0) {
          // Roll what it holds so it persists, then let it go on a later sync.
          if (r.spool.contentLength > 0n && r.spool.staged === 0) r.spool.roll();
          dropPipeline(r);
          continue;
        }
        r.pipeline?.close();
        r.close();
        this.replicas.delete(name);
      }
    }
    for (const j of journals.values()) {
      const i = memberIndex(j.route, self);
      if (i < 0) continue;
      const r = this.ensure(j.spec);
      // A pipeline outlives primacy only to be reused wrongly: should this broker become the
      // primary of an identical route again, it would skip the resynchronisation with the
      // replicas, whose spools moved on under another primary meanwhile (its stale head then
      // answers INDEX_HAS_GREATER_OFFSET forever). Drop it as soon as we are not the primary.
      if (i !== j.route.primary) dropPipeline(r);
      if (i === j.route.primary) {
        primaries++;
        if (b.member.registered && !advertised(j)) this.schedulePulse(j.name);
      }
    }
    b.metrics.journals.set({ role: 'primary' }, primaries);
    b.metrics.journals.set({ role: 'any' }, this.replicas.size);
  }

  private schedulePulse(name: string): void {
    if (this.pulsing.has(name)) return;
    if ((this.retryAt.get(name) ?? 0) > Date.now()) return;
    this.pulsing.add(name);
    void pulse(this.broker, name)
      .then(() => this.retryAt.delete(name))
      .catch((e: unknown) => {
        this.retryAt.set(name, Date.now() + 500);
        this.broker.log.debug('pulse failed', { journal: name, err: (e as Error).message });
      })
      .finally(() => this.pulsing.delete(name));
  }

  close(): void {
    if (this.timer) clearInterval(this.timer);
    for (const r of this.replicas.values()) {
      r.pipeline?.close();
      r.close();
    }
  }
}

function dropPipeline(r: Replica): void {
  if (!r.pipeline) return;
  r.pipeline.close();
  r.pipeline = undefined;
}
