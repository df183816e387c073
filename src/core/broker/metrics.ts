// Prometheus metrics of the broker, served at /metrics.

import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';

/** Bytes a broker's spools hold, by where they are. */
export interface SpoolFigures {
  spool: number;
  files: number;
  disk: number;
  queued: number;
  unpersisted: number;
}

export class Metrics {
  readonly registry = new Registry();
  readonly appendBytes = new Counter({ name: 'gazette_append_bytes_total', help: 'Bytes appended to journals at this primary', registers: [this.registry] });
  readonly appends = new Counter({ name: 'gazette_append_requests_total', help: 'Append RPCs served at this primary, by status', labelNames: ['status'], registers: [this.registry] });
  readonly readBytes = new Counter({ name: 'gazette_read_bytes_total', help: 'Journal content bytes sent to readers', registers: [this.registry] });
  readonly reads = new Counter({ name: 'gazette_read_requests_total', help: 'Read RPCs served locally', registers: [this.registry] });
  readonly replicatedBytes = new Counter({ name: 'gazette_replicate_bytes_total', help: 'Bytes received from primaries over Replicate', registers: [this.registry] });
  readonly journals = new Gauge({ name: 'gazette_journals', help: 'Journals held by this broker, by role', labelNames: ['role'], registers: [this.registry] });
  // Spool figures are read when /metrics is scraped, from the source `observeSpools` gives. They
  // stand in for a stop-writes watermark, which this broker does not have (as upstream, which
  // removed its own: it deadlocked ensembles).
  private spools: () => SpoolFigures = () => ({ spool: 0, files: 0, disk: 0, queued: 0, unpersisted: 0 });
  readonly spoolBytes = this.spoolGauge('gazette_spool_bytes', 'Committed content in the current spool files of the journals this broker holds (on disk)', 'spool');
  readonly spoolFiles = this.spoolGauge('gazette_spool_files', 'Spool files open: current spools and closed ones not yet persisted', 'files');
  readonly spoolDiskBytes = this.spoolGauge('gazette_spool_disk_bytes', 'Bytes written to open spool files (on disk)', 'disk');
  readonly spoolQueuedBytes = this.spoolGauge('gazette_spool_queued_bytes', 'Spool content held in memory, queued for writing to the spool files', 'queued');
  readonly unpersistedBytes = this.spoolGauge('gazette_unpersisted_bytes', 'Content of closed spools waiting to be persisted to a fragment store (on disk)', 'unpersisted');
  readonly persisted = new Counter({ name: 'gazette_fragments_persisted_total', help: 'Fragments persisted to stores', registers: [this.registry] });
  readonly allocationRounds = new Counter({ name: 'gazette_allocation_rounds_total', help: 'Allocation rounds run by this member as leader', registers: [this.registry] });

  constructor() {
    collectDefaultMetrics({ register: this.registry });
  }

  /** Where scrapes read the spool figures from. */
  observeSpools(source: () => SpoolFigures): void {
    this.spools = source;
  }

  private spoolGauge(name: string, help: string, field: keyof SpoolFigures): Gauge {
    const metrics = this;
    return new Gauge({
      name,
      help,
      registers: [this.registry],
      collect() {
        this.set(metrics.spools()[field]);
      },
    });
  }
}
