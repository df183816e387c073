// Taking a recovery log over and recording a store's directory into it.
//
// Until rec's Recorder (src/lib/recoverylog/recorder.ts) lands, this is the replica's writer: the
// library's LogWriter (seq_no, checksum and author continuing a played state machine) with
// appends through the process's JournalClient, fenced by journal registers as upstream: the
// hand-off no-op unions the `author` register of the new writer, and every later append checks
// that register, so a writer whose log was taken over by another author fails its next append.
import { mkdir, open, rename as fsRename, rm } from 'node:fs/promises';
import path from 'node:path';
import type { JournalClient } from '../../lib/client/journal-client.js';
import { appendOnce } from '../../lib/client/appender.js';
import { labelSet, label } from '../../lib/protocol/labels.js';
import type { FSMHints } from '../../lib/protocol/gen/recoverylog/recorded_op.js';
import { LogWriter, authorFence, takeOver, type RecordedFrame } from '../../lib/recoverylog/record.js';
import type { LogSource } from '../../lib/recoverylog/player.js';
import type { ShardRecorder } from './app.js';

/** A Recorder of a store directory into a recovery log, for one author. */
export class LogRecorder implements ShardRecorder {
  private chain: Promise<void> = Promise.resolve();
  private failure: unknown;

  constructor(
    readonly dir: string,
    private readonly journals: JournalClient,
    private readonly writer: LogWriter,
    private readonly signal: AbortSignal,
  ) {}

  get log(): string {
    return this.writer.log;
  }

  get author(): number {
    return this.writer.author;
  }

  /** Appends frames after every earlier append, fenced on this recorder's author. */
  private record(frames: RecordedFrame[]): Promise<void> {
    const total = frames.reduce((n, f) => n + f.bytes.length, 0);
    const buf = new Uint8Array(total);
    let at = 0;
    for (const f of frames) {
      buf.set(f.bytes, at);
      at += f.bytes.length;
    }
    const fence = authorFence(this.writer.author);
    this.chain = this.chain.then(async () => {
      if (this.failure) throw this.failure;
      try {
        const res = await appendOnce(this.journals, this.writer.log, [buf], {
          check_registers: { include: labelSet(label(fence.name, fence.value)), exclude: undefined },
          signal: this.signal,
        });
        this.writer.observeHead(res.commit?.end ?? 0n);
      } catch (err) {
        this.failure = err;
        throw err;
      }
    });
    return this.chain;
  }

  /** Resolves once everything recorded so far is durable in the log (rejects if an append failed). */
  barrier(): Promise<void> {
    return this.chain;
  }

  /** Hints of the recorded state (as of the ops recorded so far). */
  hints(): FSMHints {
    return this.writer.hints();
  }

  private rel(file: string): string {
    const abs = path.resolve(this.dir, file);
    if (!abs.startsWith(path.resolve(this.dir) + path.sep)) throw new Error(`${file} is not under the recorded directory ${this.dir}`);
    return '/' + path.relative(this.dir, abs).split(path.sep).join('/');
  }

  /**
   * Writes `data` as the whole content of a new file `tmp` and renames it over `target`, both
   * locally and in the log, as upstream's recorded file system does for a file created with
   * O_TRUNC, written, closed and renamed: create, write, then unlink of the old target, link of
   * the new file at the target, unlink of the temporary name. Resolves once durable.
   */
  async writeAndRename(tmp: string, target: string, data: Uint8Array): Promise<void> {
    const tmpRel = this.rel(tmp);
    const targetRel = this.rel(target);
    const frames: RecordedFrame[] = [];
    const existingTmp = this.writer.fsm.links.get(tmpRel);
    if (existingTmp !== undefined) frames.push(this.writer.unlink(existingTmp, tmpRel));
    const created = this.writer.create(tmpRel);
    frames.push(created);
    // Large writes go in pieces, as a buffered file writer records them.
    const PIECE = 1 << 16;
    for (let off = 0; off < data.length; off += PIECE) {
      frames.push(this.writer.write(created.fnode, data.subarray(off, off + PIECE), BigInt(off)));
    }
    const prev = this.writer.fsm.links.get(targetRel);
    if (prev !== undefined) frames.push(this.writer.unlink(prev, targetRel));
    frames.push(this.writer.link(created.fnode, targetRel));
    frames.push(this.writer.unlink(created.fnode, tmpRel));

    const abs = path.join(this.dir, tmpRel);
    await mkdir(path.dirname(abs), { recursive: true });
    const fh = await open(abs, 'w');
    try {
      await fh.writeFile(data);
    } finally {
      await fh.close();
    }
    await fsRename(abs, path.join(this.dir, targetRel));
    await this.record(frames);
  }

  /** Removes the local directory. */
  async destroy(): Promise<void> {
    await rm(this.dir, { recursive: true, force: true });
  }
}

/**
 * Takes the log of `hints` over for `author`: plays it to its head, appends the fenced hand-off
 * no-op continuing that state, and checks by playing again that the no-op was applied (another
 * writer's op did not get in first). Returns the writer, whose state includes the no-op.
 */
export async function takeLogOver(source: LogSource, journals: JournalClient, hints: FSMHints, author: number, signal: AbortSignal): Promise<LogWriter> {
  const fence = authorFence(author);
  return takeOver(
    source,
    async (log, bytes) => {
      const res = await appendOnce(journals, log, [bytes], { union_registers: labelSet(label(fence.name, fence.value)), signal });
      return res.commit?.end ?? 0n;
    },
    hints,
    author,
  );
}
