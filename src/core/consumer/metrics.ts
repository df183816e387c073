// Prometheus metrics of a consumer process, served at /metrics by the same server code as the
// broker's (src/core/broker/server.ts).

import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import { ReplicaStatus_Code } from '../../lib/protocol/gen/consumer/protocol.js';
import { AppendMetrics } from '../../lib/client/append-metrics.js';

export class ConsumerMetrics {
  readonly registry = new Registry();
  readonly allocationRounds = new Counter({ name: 'gazette_allocation_rounds_total', help: 'Allocation rounds run by this member as leader', registers: [this.registry] });
  readonly statusWrites = new Counter({ name: 'gazette_consumer_status_writes_total', help: 'ReplicaStatus updates written to assignment keys, by outcome', labelNames: ['outcome'], registers: [this.registry] });
  /** The append services of the shards' publishers (docs/append-buffering.md). */
  readonly appends = new AppendMetrics(this.registry);
  private source: () => Map<number, number> = () => new Map();

  constructor() {
    collectDefaultMetrics({ register: this.registry });
    const metrics = this;
    new Gauge({
      name: 'gazette_consumer_shards',
      help: 'Shard replicas held by this consumer, by status',
      labelNames: ['status'],
      registers: [this.registry],
      collect() {
        this.reset();
        for (const [code, n] of metrics.source()) this.set({ status: ReplicaStatus_Code[code] ?? String(code) }, n);
      },
    });
  }

  /** Where scrapes read the count of replicas per status from. */
  observeReplicas(source: () => Map<number, number>): void {
    this.source = source;
  }
}
