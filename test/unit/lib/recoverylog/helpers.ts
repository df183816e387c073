// Shared helpers of the recovery-log tests: a seeded PRNG, directory snapshots, a writer over an in-memory log.
import { mkdtempSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MemoryLogSource } from '../../../../src/lib/recoverylog/memory-source.js';
import { LogWriter, commitFrames, type RecordedFrame } from '../../../../src/lib/recoverylog/record.js';

/** mulberry32: a small seeded PRNG with values in [0, 1). */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function tempDir(tag = 'rlog'): string {
  return mkdtempSync(join(tmpdir(), `gazctl-${tag}-`));
}

/** Every regular file under `dir` (relative path with a leading /) with its content as hex. */
export function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (rel: string) => {
    for (const name of readdirSync(join(dir, rel)).sort()) {
      const r = `${rel}/${name}`;
      const st = statSync(join(dir, r));
      if (st.isDirectory()) walk(r);
      else out[r] = readFileSync(join(dir, r)).toString('hex');
    }
  };
  walk('');
  return out;
}

export const bytes = (s: string) => new Uint8Array(Buffer.from(s));

/** Appends frames of `w` to the in-memory log as one commit. */
export function commit(src: MemoryLogSource, w: LogWriter, ...frames: RecordedFrame[]): Promise<bigint> {
  return commitFrames((log, b) => src.append(log, b).end, w, frames);
}
