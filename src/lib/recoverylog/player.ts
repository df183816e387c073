// Playback of a recovery log into a local directory.
//
// The player reads the hinted segments in order (seeking to each one's first offset, possibly in
// other logs: forks of the shard's log), then reads the hinted log on to its head. Ops go through
// the FSM; applied ops take effect on files staged as `<dir>/.fnodes/<fnode>`. At the head, every
// live file is hard-linked to each of its paths under `dir`, the staging directory is removed and
// property files are written.
import { mkdir, open, readdir, rm, rmdir, link, stat, writeFile, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import type { FSMHints, RecordedOp } from '../protocol/gen/recoverylog/recorded_op.js';
import { GazctlError } from '../protocol/errors.js';
import type { JournalClient } from '../client/journal-client.js';
import type { ReaderOptions } from '../client/reader.js';
import { appendOnce } from '../client/appender.js';
import { FSM, assertHintsPlayed, transitioned, type ApplyOutcome } from './fsm.js';
import { decodeFrames, RecoveryLogError, type ContentChunk, type FrameEvent } from './framing.js';

/**
 * Where the player reads logs from. `head` gives a journal's head and fixes it as the end of
 * later reads of that journal: `read` yields content from `offset` up to that head (to the
 * current end when `head` was never asked), in order. Content the source no longer has is
 * either an error naming the journal and offset, or skipped: the next chunk then starts at a
 * higher offset (a jump, as a broker answers a read of a deleted range).
 */
export interface LogSource {
  head(journal: string): Promise<bigint>;
  read(journal: string, offset: bigint, signal?: AbortSignal): AsyncIterable<ContentChunk>;
}

/** Something the player noticed (for logging). */
export type PlayEvent =
  | { kind: 'head'; log: string; head: bigint }
  | { kind: 'seek'; log: string; offset: bigint; firstSeqNo: bigint }
  | { kind: 'desync'; log: string; from: bigint; to: bigint }
  | { kind: 'jump'; log: string; from: bigint; to: bigint }
  | { kind: 'skipped'; log: string; offset: bigint; seqNo: bigint; reason: ApplyOutcome }
  | { kind: 'linked'; fnode: bigint; path: string; size: bigint };

export interface PlayOptions {
  signal?: AbortSignal;
  onEvent?: (e: PlayEvent) => void;
  /**
   * Delete `dir` and everything under it first (what Go's player always does). Without it, `dir`
   * must be absent or empty.
   */
  clearDir?: boolean;
}

export interface PlayedFile {
  /** The path as recorded (relative to the recorder's root, with a leading `/`). */
  path: string;
  fnode: bigint;
  size: bigint;
}

export interface PlayResult {
  /** Live files linked under dir, by path. */
  files: PlayedFile[];
  /** Property files written, by path. */
  properties: string[];
  /** Bytes of write data applied to live files. */
  bytes: bigint;
  /** Ops that moved the state machine on (including ops on files that die later). */
  opsApplied: number;
  /** Ops left out (dead branches, duplicates, ops before a lower-bound offset), by reason. */
  opsSkipped: number;
  skippedBy: Partial<Record<ApplyOutcome, number>>;
  /** The head read through, per log. */
  heads: Map<string, bigint>;
  /** Hints of the state reached (for the hinted log). */
  hints: FSMHints;
  fsm: FSM;
}

/** What playback does with the ops it applies. */
interface Effects {
  create(fnode: bigint): Promise<void>;
  write(fnode: bigint, position: bigint, data: Uint8Array): Promise<void>;
  /** The fnode is no longer live. */
  drop(fnode: bigint): Promise<void>;
}

const NO_EFFECTS: Effects = {
  create: async () => undefined,
  write: async () => undefined,
  drop: async () => undefined,
};

interface Counters {
  bytes: bigint;
  opsApplied: number;
  opsSkipped: number;
  skippedBy: Partial<Record<ApplyOutcome, number>>;
  heads: Map<string, bigint>;
}

function abortIf(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw new GazctlError('playback cancelled', { cause: signal.reason });
}

/** The playback loop, common to playLog and playFsm. */
async function playback(source: LogSource, hints: FSMHints, fx: Effects, opts: PlayOptions): Promise<{ fsm: FSM; c: Counters }> {
  const fsm = new FSM(hints);
  const emit = opts.onEvent ?? (() => undefined);
  const signal = opts.signal;
  const c: Counters = { bytes: 0n, opsApplied: 0, opsSkipped: 0, skippedBy: {}, heads: new Map() };

  // The head of every log named: reads go through it and no further.
  const logs = new Set([hints.log, ...fsm.remainingSegments().map((s) => s.log)]);
  for (const log of logs) {
    abortIf(signal);
    const head = await source.head(log);
    c.heads.set(log, head);
    emit({ kind: 'head', log, head });
  }
  for (const s of fsm.remainingSegments()) {
    const head = c.heads.get(s.log)!;
    if (s.first_offset >= head || s.last_offset > head) {
      throw new RecoveryLogError(
        `the head of ${s.log} is ${head}, before hinted segment [${s.first_offset}, ${s.last_offset === 0n ? 'open' : s.last_offset}) (seq ${s.first_seq_no}..${s.last_seq_no}); possible data loss`,
      );
    }
  }

  let readLog = '';
  let offset = 0n;
  let readThrough = 0n;
  let it: AsyncIterator<FrameEvent> | undefined;
  const close = async () => {
    const old = it;
    it = undefined;
    if (old?.return) await old.return(undefined);
  };
  const seek = async (log: string, at: bigint) => {
    await close();
    readLog = log;
    offset = at;
    readThrough = c.heads.get(log)!;
    it = decodeFrames(log, at, source.read(log, at, signal))[Symbol.asyncIterator]();
  };
  const next = async (): Promise<FrameEvent | undefined> => {
    abortIf(signal);
    const r = await it!.next();
    return r.done ? undefined : r.value;
  };

  try {
    for (;;) {
      const seg = fsm.nextSegment;
      if (seg) {
        if (readLog !== seg.log || offset < seg.first_offset) {
          await seek(seg.log, seg.first_offset);
          emit({ kind: 'seek', log: seg.log, offset: seg.first_offset, firstSeqNo: seg.first_seq_no });
        } else if (offset >= readThrough) {
          throw new RecoveryLogError(`read ${readLog} through its head ${readThrough} with hinted segments left (next: seq ${seg.first_seq_no} at offset ${seg.first_offset}); possible data loss`);
        }
      } else if (readLog === '') {
        await seek(hints.log, 0n); // no hints: the whole log
      } else if (readLog !== hints.log) {
        throw new RecoveryLogError(`the hinted segments end in ${readLog}, not in the hints' log ${hints.log}`);
      } else if (offset >= readThrough) {
        break; // at the head
      }

      const ev = await next();
      if (!ev) {
        if (offset < readThrough) throw new RecoveryLogError(`${readLog}: content ends at offset ${offset}, before the head ${readThrough}`);
        if (fsm.nextSegment) continue; // the loop reports the unplayed hints
        break;
      }
      switch (ev.kind) {
        case 'desync':
          emit({ kind: 'desync', log: readLog, from: ev.from, to: ev.to });
          offset = ev.to;
          break;
        case 'jump': {
          const s = fsm.nextSegment;
          if (s && s.log === readLog && s.last_offset !== 0n && s.last_offset < ev.to) {
            throw new RecoveryLogError(
              `${readLog}: content jumps from ${ev.from} to ${ev.to}, over hinted segment [${s.first_offset}, ${s.last_offset}); possible data loss`,
            );
          }
          emit({ kind: 'jump', log: readLog, from: ev.from, to: ev.to });
          offset = ev.to;
          break;
        }
        case 'data':
          throw new RecoveryLogError(`${readLog}: offset ${ev.offset}: write data without its op`);
        case 'op': {
          const op = ev.op;
          const outcome = fsm.apply(op, ev.payload);
          if (transitioned(outcome)) c.opsApplied++;
          else {
            c.opsSkipped++;
            c.skippedBy[outcome] = (c.skippedBy[outcome] ?? 0) + 1;
            emit({ kind: 'skipped', log: readLog, offset: op.first_offset, seqNo: op.seq_no, reason: outcome });
          }
          await reenact(op, outcome, fsm, fx, next, c);
          offset = op.last_offset;
          break;
        }
      }
    }
  } finally {
    await close();
  }
  assertHintsPlayed(fsm, `playing ${hints.log}`);
  return { fsm, c };
}

/** Carries out an op's local effect, consuming a write's data (applied or not). */
async function reenact(op: RecordedOp, outcome: ApplyOutcome, fsm: FSM, fx: Effects, next: () => Promise<FrameEvent | undefined>, c: Counters): Promise<void> {
  const applied = outcome === 'applied';
  if (applied && op.create) await fx.create(op.seq_no);
  if (applied && op.unlink && !fsm.liveNodes.has(op.unlink.fnode)) await fx.drop(op.unlink.fnode);
  if (!op.write) return;
  let left = op.write.length;
  let pos = op.write.offset;
  while (left > 0n) {
    const ev = await next();
    if (!ev || ev.kind !== 'data') throw new RecoveryLogError(`${op.log}: offset ${op.first_offset}: the data of a write op is cut short`);
    if (applied) {
      await fx.write(op.write.fnode, pos, ev.bytes);
      c.bytes += BigInt(ev.bytes.length);
    }
    pos += BigInt(ev.bytes.length);
    left -= BigInt(ev.bytes.length);
  }
}

/**
 * Plays `hints` through the state machine only, touching no files: the state (and hints) at
 * the logs' heads, e.g. for a writer taking a log over.
 */
export async function playFsm(source: LogSource, hints: FSMHints, opts: Omit<PlayOptions, 'clearDir'> = {}): Promise<Omit<PlayResult, 'files' | 'properties'>> {
  const { fsm, c } = await playback(source, hints, NO_EFFECTS, opts);
  return { ...c, hints: fsm.buildHints(hints.log), fsm };
}

const STAGING = '.fnodes';

/** `rel` (a recorded path) under `dir`; throws when it would leave `dir`. */
function under(dir: string, rel: string): string {
  const parts = rel.split('/');
  if (parts.some((p) => p === '..' || p === '.') || rel.includes('\0')) throw new RecoveryLogError(`recorded path ${JSON.stringify(rel)} is not a file under the playback directory`);
  const target = path.resolve(dir, '.' + path.posix.normalize('/' + rel));
  const root = path.resolve(dir);
  if (target === root || !target.startsWith(root + path.sep)) throw new RecoveryLogError(`recorded path ${JSON.stringify(rel)} is not a file under the playback directory`);
  return target;
}

async function prepareDir(dir: string, clear: boolean): Promise<void> {
  if (clear) await rm(dir, { recursive: true, force: true });
  else {
    let entries: string[] = [];
    try {
      entries = await readdir(dir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    if (entries.length > 0) throw new GazctlError(`playback directory ${dir} is not empty`);
  }
  await mkdir(path.join(dir, STAGING), { recursive: true });
}

/**
 * Plays the recovery log of `hints` into `dir` as of the logs' heads (see LogSource): the
 * hinted segments (possibly in several logs), then the hinted log to its head. Files are staged
 * in `<dir>/.fnodes/<fnode>`; at the head live files are hard-linked to their paths under dir
 * (parent directories created), the staging directory is removed and property files are written.
 * On failure or cancellation the directory is removed again.
 */
export async function playLog(source: LogSource, hints: FSMHints, dir: string, opts: PlayOptions = {}): Promise<PlayResult> {
  // Validate before touching the directory.
  new FSM(hints);
  await prepareDir(dir, opts.clearDir ?? false);
  const handles = new Map<bigint, FileHandle>();
  const staged = (fnode: bigint) => path.join(dir, STAGING, fnode.toString());
  const fx: Effects = {
    async create(fnode) {
      handles.set(fnode, await open(staged(fnode), 'wx'));
    },
    async write(fnode, position, data) {
      const h = handles.get(fnode);
      if (!h) throw new RecoveryLogError(`write to fnode ${fnode}, which has no staged file`);
      let done = 0;
      while (done < data.length) {
        const { bytesWritten } = await h.write(data, done, data.length - done, Number(position) + done);
        done += bytesWritten;
      }
    },
    async drop(fnode) {
      const h = handles.get(fnode);
      handles.delete(fnode);
      await h?.close();
      await rm(staged(fnode), { force: true });
    },
  };
  try {
    const { fsm, c } = await playback(source, hints, fx, opts);
    const files: PlayedFile[] = [];
    for (const [fnode, node] of fsm.liveNodes) {
      const h = handles.get(fnode);
      if (!h) throw new RecoveryLogError(`live fnode ${fnode} has no staged file`);
      handles.delete(fnode);
      await h.close();
      for (const p of [...node.links].sort()) {
        const target = under(dir, p);
        await mkdir(path.dirname(target), { recursive: true });
        await link(staged(fnode), target);
        const size = BigInt((await stat(target)).size);
        files.push({ path: p, fnode, size });
        opts.onEvent?.({ kind: 'linked', fnode, path: p, size });
      }
      await rm(staged(fnode));
    }
    if (handles.size > 0) throw new RecoveryLogError(`staged files not live at the head: ${[...handles.keys()].join(', ')}`);
    await rmdir(path.join(dir, STAGING));
    const properties: string[] = [];
    for (const [p, content] of [...fsm.properties].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
      const target = under(dir, p);
      await mkdir(path.dirname(target), { recursive: true });
      await writeFile(target, content, { flag: 'wx' });
      properties.push(p);
    }
    files.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
    return { files, properties, ...c, hints: fsm.buildHints(hints.log), fsm };
  } catch (err) {
    for (const h of handles.values()) await h.close().catch(() => undefined);
    await rm(dir, { recursive: true, force: true }).catch(() => undefined);
    throw err;
  }
}

// ---- a LogSource over a broker -------------------------------------------------------------------

export interface JournalLogSourceOptions {
  /**
   * How a log's head is found. `barrier` (default; what Go's player does): a zero-byte append,
   * whose commit end is a head every earlier append is below. It is a real append: it needs
   * append permission and resumes a suspended journal. `write-head`: a metadata-only,
   * non-blocking read reporting the broker's write head; it writes nothing, but an append in
   * flight at that moment may or may not be below it.
   */
  head?: 'barrier' | 'write-head';
  /** Options of the Readers (direct reads, retries, stores). */
  reader?: Omit<ReaderOptions, 'signal'>;
  signal?: AbortSignal;
  /** Time budget of each barrier append, retries included. */
  timeoutMs?: number;
  /**
   * Blocking reads up to the head (a consumer's recovery; upstream's player reads blocking): when
   * a broker cannot serve part of the committed content yet — the broker that held it in its
   * spool was killed, and a new primary's spool starts later while a surviving replica persists
   * it — the read waits for it instead of ending early. Default false (`shards recover` ends with
   * an error rather than waiting on a log that lost content).
   */
  block?: boolean;
}

/** A LogSource reading journals through `client`. */
export function journalLogSource(client: JournalClient, opts: JournalLogSourceOptions = {}): LogSource {
  const heads = new Map<string, bigint>();
  return {
    async head(journal) {
      let head: bigint;
      if ((opts.head ?? 'barrier') === 'barrier') {
        const res = await appendOnce(client, journal, [], { signal: opts.signal, timeoutMs: opts.timeoutMs });
        head = res.commit?.end ?? 0n;
      } else {
        const r = client.read({ journal, offset: 0n, metadata_only: true, block: false }, { directReads: false, signal: opts.signal });
        for await (const _ of r) {
          // metadata only: the reader holds the write head once answered
        }
        head = r.writeHead;
      }
      heads.set(journal, head);
      return head;
    },
    async *read(journal, offset, signal) {
      const end = heads.get(journal);
      if (end !== undefined && offset >= end) return;
      const sig = signal && opts.signal ? AbortSignal.any([signal, opts.signal]) : (signal ?? opts.signal);
      const r = client.read({ journal, offset, block: opts.block ?? false, end_offset: end ?? 0n }, { ...opts.reader, signal: sig });
      for await (const chunk of r) {
        if (chunk.content.length === 0) continue;
        // Pooled buffers are copied and given back: the decoder may keep a partial frame.
        const content = chunk.release ? Uint8Array.prototype.slice.call(chunk.content) : chunk.content;
        chunk.release?.();
        yield { offset: chunk.offset, content };
      }
    },
  };
}
