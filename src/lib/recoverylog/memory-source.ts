// An in-memory LogSource of journals made of fragments, for tests and tools: content is appended,
// fragments are rolled at append boundaries, and fragments can be deleted (as a prune would).
import type { Fragment } from '../protocol/gen/broker/protocol.js';
import { CompressionCodec } from '../protocol/gen/broker/protocol.js';
import { RecoveryLogError, type ContentChunk } from './framing.js';
import type { LogSource } from './player.js';

interface MemFragment {
  begin: bigint;
  end: bigint;
  modTime: bigint;
  deleted: boolean;
}

interface MemJournal {
  data: Uint8Array;
  size: number;
  fragments: MemFragment[];
  /** Whether the last fragment takes further appends. */
  open: boolean;
  askedHead?: bigint;
}

export interface MemoryLogSourceOptions {
  /** Largest chunk a read yields (default 64 KiB), to exercise frames split across chunks. */
  chunkSize?: number;
  /** What a read of deleted content does: throw (default) or jump to the next content, as a broker does. */
  onMissing?: 'error' | 'jump';
  /** The backing store named by listed fragments (default file:///mem/). */
  store?: string;
}

export class MemoryLogSource implements LogSource {
  private readonly journals = new Map<string, MemJournal>();
  /** Reads made, as [journal, offset] (tests check seeks). */
  readonly reads: [string, bigint][] = [];

  constructor(private readonly opts: MemoryLogSourceOptions = {}) {}

  private journal(name: string): MemJournal {
    let j = this.journals.get(name);
    if (!j) {
      j = { data: new Uint8Array(1024), size: 0, fragments: [], open: false };
      this.journals.set(name, j);
    }
    return j;
  }

  /** Appends `bytes` atomically; returns the range written. */
  append(journal: string, bytes: Uint8Array): { begin: bigint; end: bigint } {
    const j = this.journal(journal);
    const begin = BigInt(j.size);
    if (j.size + bytes.length > j.data.length) {
      const grown = new Uint8Array(Math.max(j.data.length * 2, j.size + bytes.length));
      grown.set(j.data.subarray(0, j.size));
      j.data = grown;
    }
    j.data.set(bytes, j.size);
    j.size += bytes.length;
    const end = BigInt(j.size);
    if (bytes.length > 0) {
      const last = j.fragments[j.fragments.length - 1];
      if (j.open && last) last.end = end;
      else {
        j.fragments.push({ begin, end, modTime: 0n, deleted: false });
        j.open = true;
      }
    }
    return { begin, end };
  }

  /** Closes the current fragment: the next append starts a new one. With `persistAt`, the closed fragment gets that mod_time. */
  roll(journal: string, persistAt?: bigint): void {
    const j = this.journal(journal);
    const last = j.fragments[j.fragments.length - 1];
    if (j.open && last && persistAt !== undefined) last.modTime = persistAt;
    j.open = false;
  }

  /** Gives every closed, unpersisted fragment of `journal` the mod_time `at`. */
  persist(journal: string, at: bigint): void {
    const j = this.journal(journal);
    j.fragments.forEach((f, i) => {
      if (f.modTime === 0n && (i < j.fragments.length - 1 || !j.open)) f.modTime = at;
    });
  }

  /** The journal's current write head. */
  writeHead(journal: string): bigint {
    return BigInt(this.journal(journal).size);
  }

  /** The journal's fragments not deleted, as a broker lists them. */
  fragments(journal: string): Fragment[] {
    const store = this.opts.store ?? 'file:///mem/';
    return this.journal(journal)
      .fragments.filter((f) => !f.deleted)
      .map((f) => ({
        journal,
        begin: f.begin,
        end: f.end,
        sum: undefined,
        compression_codec: CompressionCodec.NONE,
        backing_store: f.modTime === 0n ? '' : store,
        mod_time: f.modTime,
        path_postfix: '',
      }));
  }

  /** Deletes the fragment [begin, end) of `journal`; false when there is none. */
  deleteFragment(journal: string, begin: bigint, end: bigint): boolean {
    const f = this.journal(journal).fragments.find((x) => !x.deleted && x.begin === begin && x.end === end);
    if (!f) return false;
    f.deleted = true;
    return true;
  }

  /** A copy of the journals and fragments (deletions included). */
  clone(): MemoryLogSource {
    const c = new MemoryLogSource(this.opts);
    for (const [name, j] of this.journals) {
      c.journals.set(name, { data: j.data.slice(0, j.size), size: j.size, fragments: j.fragments.map((f) => ({ ...f })), open: j.open });
    }
    return c;
  }

  async head(journal: string): Promise<bigint> {
    const j = this.journal(journal);
    j.askedHead = BigInt(j.size);
    return j.askedHead;
  }

  async *read(journal: string, offset: bigint, signal?: AbortSignal): AsyncGenerator<ContentChunk, void, undefined> {
    this.reads.push([journal, offset]);
    const j = this.journal(journal);
    const end = j.askedHead ?? BigInt(j.size);
    const chunk = BigInt(Math.max(1, this.opts.chunkSize ?? 65536));
    let at = offset;
    for (const f of j.fragments) {
      if (at >= end) return;
      if (f.deleted || f.end <= at) continue;
      if (f.begin > at) {
        if ((this.opts.onMissing ?? 'error') === 'error') throw new RecoveryLogError(`${journal}: no content at offset ${at} (next content at ${f.begin})`);
        at = f.begin;
        if (at >= end) return;
      }
      const stop = f.end < end ? f.end : end;
      while (at < stop) {
        if (signal?.aborted) return;
        const n = stop - at < chunk ? stop - at : chunk;
        // A copy: readers must not rely on the source's memory.
        yield { offset: at, content: j.data.slice(Number(at), Number(at + n)) };
        at += n;
      }
    }
    if (at < end) throw new RecoveryLogError(`${journal}: no content at offset ${at} (the journal's head is ${end})`);
  }
}
