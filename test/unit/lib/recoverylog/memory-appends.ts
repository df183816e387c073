// An append client over a MemoryLogSource for unit tests of the Recorder: appends are atomic,
// journal registers behave as a broker's (check_registers include, union replacing values by
// name), and failures can be scripted. The real thing is exercised by the integration tests.
import { Status, type AppendResponse, type LabelSet } from '../../../../src/lib/protocol/gen/broker/protocol.js';
import { BrokerStatusError, TransportError } from '../../../../src/lib/protocol/errors.js';
import type { AppendOptions } from '../../../../src/lib/client/appender.js';
import type { MemoryLogSource } from '../../../../src/lib/recoverylog/memory-source.js';
import type { RecorderAppend, RecorderAppendClient } from '../../../../src/lib/recoverylog/recorder.js';

export interface AppendRecord {
  journal: string;
  bytes: number;
  check?: string;
  union?: string;
  ok: boolean;
}

const fmt = (ls: LabelSet | undefined) => ls?.labels.map((l) => `${l.name}=${l.value}`).join(',');

export class MemoryAppends implements RecorderAppendClient {
  readonly registers = new Map<string, Map<string, string>>();
  readonly appends: AppendRecord[] = [];
  /** Failures to throw at the next commits (then the append succeeds). */
  failNext: unknown[] = [];
  /** When set, commits wait for it. */
  gate: Promise<void> | undefined;

  constructor(readonly src: MemoryLogSource) {}

  unavailable(): TransportError {
    return new TransportError('broker unavailable', 14);
  }

  append(journal: string, opts: AppendOptions = {}): RecorderAppend {
    const parts: Uint8Array[] = [];
    let done = false;
    return {
      write: async (chunk) => {
        parts.push(chunk.slice());
      },
      abort: () => {
        done = true;
      },
      commit: async (): Promise<AppendResponse> => {
        if (done) throw new Error('append already finished');
        done = true;
        if (this.gate) await this.gate;
        const bytes = Buffer.concat(parts);
        const rec: AppendRecord = { journal, bytes: bytes.length, check: fmt(opts.check_registers?.include), union: fmt(opts.union_registers), ok: false };
        this.appends.push(rec);
        const fail = this.failNext.shift();
        if (fail) throw fail;
        const regs = this.registers.get(journal) ?? new Map<string, string>();
        for (const l of opts.check_registers?.include?.labels ?? []) {
          if (regs.get(l.name) !== l.value) throw new BrokerStatusError(Status.REGISTER_MISMATCH, `appending to ${journal}`);
        }
        for (const l of opts.union_registers?.labels ?? []) regs.set(l.name, l.value);
        this.registers.set(journal, regs);
        const { begin, end } = bytes.length > 0 ? this.src.append(journal, bytes) : { begin: 0n, end: 0n };
        const head = bytes.length > 0 ? end : this.src.writeHead(journal);
        rec.ok = true;
        return {
          status: Status.OK,
          header: undefined,
          commit: {
            journal,
            begin: bytes.length > 0 ? begin : head,
            end: head,
            sum: undefined,
            compression_codec: 0,
            backing_store: '',
            mod_time: 0n,
            path_postfix: '',
          },
          registers: { labels: [...regs].map(([name, value]) => ({ name, value, prefix: false })) },
          total_chunks: 0n,
          delayed_chunks: 0n,
          store_health_error: '',
        } as unknown as AppendResponse;
      },
    };
  }
}
