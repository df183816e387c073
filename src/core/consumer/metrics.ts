// Prometheus metrics of a consumer process, served at /metrics by the same server code as the
// broker's (src/core/broker/server.ts).

import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import { ReplicaStatus_Code } from '../../lib/protocol/gen/consumer/protocol.js';
import { AppendMetrics } from '../../lib/client/append-metrics.js';

export class ConsumerMetrics {
  readonly registry = new Registry();
  readonly allocationRounds = new Counter({ name: 'gazette_allocation_rounds_total', help: 'Allocation rounds run by this member as leader', registers: [this.registry] });
  readonly statusWrites = new Counter({ name: 'gazette_consumer_status_writes_total', help: 'ReplicaStatus updates written to assignment keys, by outcome', labelNames: ['outcome'], registers: [this.registry] });
  // Per shard, under upstream's names, so one dashboard reads Go consumers and ours: transactions
  // completed, and the messages and bytes they consumed. Messages over transactions is how much
  // a shard batches (docs/consumer.md, "Keeping up").
  readonly shardTransactions = new Counter({ name: 'gazette_shard_transactions_total', help: 'Total number of consumer transactions.', labelNames: ['shard'], registers: [this.registry] });
  readonly shardReadMessages = new Counter({
    name: 'gazette_shard_read_messages_total',
    help: 'Total number of messages processed by completed consumer transactions.',
    labelNames: ['shard'],
    registers: [this.registry],
  });
  readonly shardReadBytes = new Counter({
    name: 'gazette_shard_read_bytes_total',
    help: 'Total byte-length of messages processed by completed consumer transactions.',
    labelNames: ['shard'],
    registers: [this.registry],
  });
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

  /** Counts a completed transaction of `shard` (its etcd key, as upstream labels it). */
  transactionCompleted(shard: string, messages: number, bytes: number): void {
    this.shardTransactions.inc({ shard });
    this.shardReadMessages.inc({ shard }, messages);
    this.shardReadBytes.inc({ shard }, bytes);
  }

  /** Where scrapes read the count of replicas per status from. */
  observeReplicas(source: () => Map<number, number>): void {
    this.source = source;
  }
}
