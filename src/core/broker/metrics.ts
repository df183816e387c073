// Prometheus metrics of the broker, served at /metrics.

import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';

export class Metrics {
  readonly registry = new Registry();
  readonly appendBytes = new Counter({ name: 'gazette_append_bytes_total', help: 'Bytes appended to journals at this primary', registers: [this.registry] });
  readonly appends = new Counter({ name: 'gazette_append_requests_total', help: 'Append RPCs served at this primary, by status', labelNames: ['status'], registers: [this.registry] });
  readonly readBytes = new Counter({ name: 'gazette_read_bytes_total', help: 'Journal content bytes sent to readers', registers: [this.registry] });
  readonly reads = new Counter({ name: 'gazette_read_requests_total', help: 'Read RPCs served locally', registers: [this.registry] });
  readonly replicatedBytes = new Counter({ name: 'gazette_replicate_bytes_total', help: 'Bytes received from primaries over Replicate', registers: [this.registry] });
  readonly journals = new Gauge({ name: 'gazette_journals', help: 'Journals held by this broker, by role', labelNames: ['role'], registers: [this.registry] });
  readonly spoolBytes = new Gauge({ name: 'gazette_spool_bytes', help: 'Bytes held in memory by spools and unpersisted fragments', registers: [this.registry] });
  readonly persisted = new Counter({ name: 'gazette_fragments_persisted_total', help: 'Fragments persisted to stores', registers: [this.registry] });
  readonly allocationRounds = new Counter({ name: 'gazette_allocation_rounds_total', help: 'Allocation rounds run by this member as leader', registers: [this.registry] });

  constructor() {
    collectDefaultMetrics({ register: this.registry });
  }
}
