// Prometheus metrics of append services (prom-client), in a registry the caller chooses.
//
// Nothing is registered unless a caller makes an AppendMetrics with its registry and passes it to
// its services (`new AppendService(client, { metrics })`, or `Publisher`'s `append.metrics`): a
// library user is never put into prom-client's global registry. Any number of services may share
// one AppendMetrics; gauges report their sum when scraped. Services are held weakly, so one that
// is dropped without close() (a consumer's publisher of a finished replica) stops being reported
// once it is collected. There are no labels (a journal label,
// as upstream's appended-bytes counter has, grows with the number of journals a producer writes).
// docs/append-buffering.md says what to alert on.
import { Counter, Gauge, type Registry } from 'prom-client';
import type { AppendBufferFigures } from './append-service.js';

/** Something that reports buffer figures (an AppendService). */
export interface AppendFiguresSource {
  figures(): AppendBufferFigures;
}

export class AppendMetrics {
  private readonly sources = new Set<WeakRef<AppendFiguresSource>>();
  private readonly appendedBytes: Counter;
  private readonly retries: Counter;
  private readonly waitTimeouts: Counter;

  constructor(registry: Registry) {
    const registers = [registry];
    // Upstream's name for bytes its client appended.
    this.appendedBytes = new Counter({ name: 'gazette_append_bytes_total', help: 'Journal bytes appended (committed) by this process\'s append services', registers });
    this.retries = new Counter({ name: 'gazette_append_service_retries_total', help: 'Appends retried after a failure the broker cannot have committed (or any, for publishers of messages)', registers });
    this.waitTimeouts = new Counter({
      name: 'gazette_append_service_wait_timeouts_total',
      help: 'Producer waits for buffer space that ran out of time (AppendWaitTimeoutError)',
      registers,
    });
    this.gauge(registry, 'gazette_append_service_disk_buffer_bytes', 'Bytes of pending appends held in temporary files on disk', 'diskBytes');
    this.gauge(registry, 'gazette_append_service_disk_buffer_limit_bytes', 'Bytes on disk past which producers wait (0: no disk buffering)', 'diskLimitBytes');
    this.gauge(registry, 'gazette_append_service_disk_buffer_files', 'Temporary files of pending appends open', 'diskFiles');
    this.gauge(registry, 'gazette_append_service_memory_buffer_bytes', 'Bytes of pending appends held in memory (queued, or kept for replay)', 'memoryBytes');
    this.gauge(registry, 'gazette_append_service_inflight_bytes', 'Bytes taken by appends under way and not yet committed (from memory or disk)', 'inflightBytes');
  }

  /** Reports `source`'s figures from now on (an AppendService calls this when given the metrics). */
  track(source: AppendFiguresSource): void {
    this.sources.add(new WeakRef(source));
  }

  /** Stops reporting `source` (on its close()). */
  untrack(source: AppendFiguresSource): void {
    for (const r of this.sources) if (r.deref() === source) this.sources.delete(r);
  }

  /** The sum of a figure over the services still alive. */
  private sum(field: keyof AppendBufferFigures): number {
    let sum = 0;
    for (const r of this.sources) {
      const s = r.deref();
      if (s) sum += s.figures()[field];
      else this.sources.delete(r);
    }
    return sum;
  }

  appended(bytes: number): void {
    this.appendedBytes.inc(bytes);
  }

  retried(): void {
    this.retries.inc();
  }

  waitTimedOut(): void {
    this.waitTimeouts.inc();
  }

  private gauge(registry: Registry, name: string, help: string, field: keyof AppendBufferFigures): void {
    const sum = (f: keyof AppendBufferFigures) => this.sum(f);
    new Gauge({
      name,
      help,
      registers: [registry],
      collect() {
        this.set(sum(field));
      },
    });
  }
}
