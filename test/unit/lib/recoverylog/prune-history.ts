// Randomized recovery-log histories for the prune property test (see prune-property.test.ts).
import type { FSMHints } from '../../../../src/lib/protocol/gen/recoverylog/recorded_op.js';
import { MemoryLogSource } from '../../../../src/lib/recoverylog/memory-source.js';
import { LogWriter, takeOver, type RecordedFrame } from '../../../../src/lib/recoverylog/record.js';
import { emptyHints } from '../../../../src/lib/recoverylog/hints.js';
import { commit, prng } from './helpers.js';

/** The files a writer believes it has: content per fnode, fnode per path, properties. */
export class Model {
  content = new Map<bigint, Buffer>();
  paths = new Map<string, bigint>();
  props = new Map<string, string>();
  clone(): Model {
    const m = new Model();
    for (const [k, v] of this.content) m.content.set(k, Buffer.from(v));
    m.paths = new Map(this.paths);
    m.props = new Map(this.props);
    return m;
  }
  expected(): Record<string, string> {
    const out: Record<string, string> = {};
    for (const [p, f] of this.paths) out[p] = this.content.get(f)!.toString('hex');
    for (const [p, c] of this.props) out[p] = Buffer.from(c).toString('hex');
    return Object.fromEntries(Object.entries(out).sort(([a], [b]) => (a < b ? -1 : 1)));
  }
}

export interface Case {
  src: MemoryLogSource;
  log: string;
  primary?: FSMHints;
  backups: (FSMHints | undefined)[];
  model: Model;
  takeOvers: number;
  staleOps: number;
}

export async function history(seed: number): Promise<Case> {
  const r = prng(seed);
  const int = (n: number) => Math.floor(r() * n);
  const src = new MemoryLogSource({ chunkSize: 1 + int(r() < 0.08 ? 16 : 3000) });
  const log = `recovery/logs/shard-${String(seed).padStart(4, '0')}`;
  const append = (l: string, b: Uint8Array) => src.append(l, b).end;
  let writer = new LogWriter({ log, author: 1 + int(0xfffffffe) });
  let model = new Model();
  let primary: FSMHints | undefined;
  const backups: (FSMHints | undefined)[] = new Array(int(3)).fill(undefined);
  let takeOvers = 0;
  let staleOps = 0;
  let nextName = 0;
  let modTime = 1n;

  /** Random ops of `w` that keep `m` in step; returns the frames of one commit. */
  const ops = (w: LogWriter, m: Model, n: number): RecordedFrame[] => {
    const out: RecordedFrame[] = [];
    for (let i = 0; i < n; i++) {
      const paths = [...m.paths.keys()];
      const roll = r();
      if (paths.length === 0 || (roll < 0.25 && paths.length < 6)) {
        const path = `/${r() < 0.3 ? 'dir/' : ''}${String(nextName++).padStart(6, '0')}.sst`;
        const f = w.create(path);
        out.push(f);
        m.content.set(f.fnode, Buffer.alloc(0));
        m.paths.set(path, f.fnode);
      } else if (roll < 0.7) {
        const fnode = m.paths.get(paths[int(paths.length)]!)!;
        const cur = m.content.get(fnode)!;
        const data = Buffer.alloc(int(200), int(256));
        const at = int(cur.length + 1);
        out.push(w.write(fnode, data, BigInt(at)));
        const next = Buffer.alloc(Math.max(cur.length, at + data.length));
        cur.copy(next);
        data.copy(next, at);
        m.content.set(fnode, next);
      } else if (roll < 0.8) {
        const fnode = m.paths.get(paths[int(paths.length)]!)!;
        const path = `/link-${nextName++}`;
        out.push(w.link(fnode, path));
        m.paths.set(path, fnode);
      } else if (roll < 0.95) {
        const path = paths[int(paths.length)]!;
        const fnode = m.paths.get(path)!;
        out.push(w.unlink(fnode, path));
        m.paths.delete(path);
        if (![...m.paths.values()].includes(fnode)) m.content.delete(fnode);
      } else {
        const content = `guid-${int(1000)}\n`;
        out.push(w.property('/IDENTITY', content));
        m.props.set('/IDENTITY', content);
      }
    }
    return out;
  };

  const steps = 15 + int(50);
  for (let step = 0; step < steps; step++) {
    await commit(src, writer, ...ops(writer, model, 1 + int(3)));
    if (r() < 0.25) src.roll(log, modTime++);
    if (r() < 0.3) primary = writer.hints();
    if (r() < 0.12) {
      // A take-over: the new writer recovers from the primary hints, which rotate into the backups.
      const stale = writer;
      const staleModel = model.clone();
      const from = primary ?? emptyHints(log);
      writer = await takeOver(src, append, from, 1 + int(0xfffffffe));
      takeOvers++;
      if (backups.length > 0) backups.splice(0, backups.length, from === primary ? primary : undefined, ...backups.slice(0, backups.length - 1));
      if (r() < 0.5) primary = writer.hints();
      if (r() < 0.5) {
        // The old writer has not noticed yet: its ops land in the log and must be skipped.
        const n = 1 + int(3);
        await commit(src, stale, ...ops(stale, staleModel, n));
        staleOps += n;
      }
      if (r() < 0.3) src.roll(log, modTime++);
    }
  }
  if (r() < 0.5) src.persist(log, modTime++);
  return { src, log, primary, backups, model, takeOvers, staleOps };
}

