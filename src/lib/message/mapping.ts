// How `journals append` maps records to journals: random, modulo or rendezvous hashing of a
// partition key (32-bit FNV-1a), or direct (the key names the journal).
import { GazctlError } from '../protocol/errors.js';

export type Mapping = 'random' | 'modulo' | 'rendezvous' | 'direct';

export function fnv1a32(data: Uint8Array): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < data.length; i++) {
    h ^= data[i]!;
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** A snapshot of candidate journals (in listing order) with cached name hashes. */
export class JournalSet {
  readonly names: string[];
  private readonly hashes: number[];
  private readonly index: Map<string, number>;

  constructor(names: string[]) {
    this.names = names;
    this.hashes = names.map((n) => fnv1a32(Buffer.from(n, 'utf8')));
    this.index = new Map(names.map((n, i) => [n, i]));
  }

  get size(): number {
    return this.names.length;
  }

  pick(mapping: Mapping, key: Buffer | undefined, random: () => number = Math.random): string {
    const n = this.names.length;
    if (n === 0) throw new GazctlError('no journals match the selector: nothing to append to');
    switch (mapping) {
      case 'random':
        return this.names[Math.floor(random() * n)]!;
      case 'modulo':
        return this.names[fnv1a32(key!) % n]!;
      case 'rendezvous': {
        const h = fnv1a32(key!);
        let best = 0;
        let bestW = -1;
        for (let i = 0; i < n; i++) {
          const w = (h ^ this.hashes[i]!) >>> 0;
          if (w > bestW) {
            bestW = w;
            best = i;
          }
        }
        return this.names[best]!;
      }
      case 'direct': {
        const name = key!.toString('utf8');
        if (!this.index.has(name)) throw new GazctlError(`journal ${JSON.stringify(name)} not found among the journals matching the selector`);
        return name;
      }
    }
  }
}
