// Framing recovery-log ops: a LogWriter keeps the state machine of the history it wrote and
// emits frames that continue it (seq_no and checksum of its state, its author). It does no I/O:
// the Recorder (recorder.ts) is the one writer of journals and builds on it; tests and tools
// append a LogWriter's frames to in-memory logs themselves (commitFrames, takeOver). After each
// commit the write head is reported back, the lower bound of the offsets of the next ops (their
// exact offsets are known only to a reader).
import { randomInt } from 'node:crypto';
import type { FSMHints, RecordedOp } from '../protocol/gen/recoverylog/recorded_op.js';
import { FSM, type ApplyOutcome } from './fsm.js';
import { FRAME_HEADER_BYTES, RecoveryLogError, encodeOpFrame } from './framing.js';
import { emptyHints } from './hints.js';
import { playFsm, type LogSource } from './player.js';

/** A frame (with its write data) and the op it holds. */
export interface RecordedFrame {
  op: RecordedOp;
  bytes: Uint8Array;
}

export interface LogWriterOptions {
  /** The log written. */
  log: string;
  /** Non-zero author of the ops. */
  author: number;
  /** The state to continue (default: a new log). */
  fsm?: FSM;
  /** The write head known when starting (default 0). */
  writeHead?: bigint;
}

function baseOp(): RecordedOp {
  return {
    seq_no: 0n,
    checksum: 0,
    author: 0,
    create: undefined,
    link: undefined,
    unlink: undefined,
    write: undefined,
    property: undefined,
    first_offset: 0n,
    last_offset: 0n,
    log: '',
  };
}

/**
 * A random author in [1, 2^32 − 2] (upstream's range). Authors tell writers of one log apart, so
 * by default they come from the system's CSPRNG, as upstream's do; `rand` (in [0, 1)) is for tests.
 */
export function randomAuthor(rand?: () => number): number {
  if (rand) return 1 + Math.floor(rand() * 0xfffffffe);
  return randomInt(1, 0xffffffff);
}

/** The journal register label fencing appends to a log for `author` (its number in base 32). */
export function authorFence(author: number): { name: string; value: string } {
  return { name: 'author', value: author.toString(32) };
}

export class LogWriter {
  readonly log: string;
  readonly author: number;
  readonly fsm: FSM;
  /** Lower bound of the offset of the next op: the last write head reported. */
  writeHead: bigint;

  constructor(opts: LogWriterOptions) {
    if (!Number.isInteger(opts.author) || opts.author <= 0 || opts.author > 0xffffffff) throw new RecoveryLogError(`invalid author ${opts.author}`);
    this.log = opts.log;
    this.author = opts.author;
    this.fsm = opts.fsm ?? new FSM(emptyHints(opts.log));
    this.writeHead = opts.writeHead ?? 0n;
  }

  /** The op continuing the writer's history with `body`, not yet applied. */
  private next(body: Partial<RecordedOp>): RecordedOp {
    return { ...baseOp(), ...body, seq_no: this.fsm.nextSeqNo, checksum: this.fsm.nextChecksum, author: this.author };
  }

  private emit(op: RecordedOp, data?: Uint8Array): RecordedFrame {
    const bytes = encodeOpFrame(op, data);
    const n = new DataView(bytes.buffer, bytes.byteOffset + 4, 4).getUint32(0, true);
    const payload = bytes.subarray(FRAME_HEADER_BYTES, FRAME_HEADER_BYTES + n);
    const applied: RecordedOp = { ...op, first_offset: this.writeHead, last_offset: 0n, log: this.log };
    const outcome: ApplyOutcome = this.fsm.apply(applied, payload);
    if (outcome !== 'applied') throw new RecoveryLogError(`cannot record ${JSON.stringify(Object.keys(body(op)))}: ${outcome}`);
    return { op, bytes };
  }

  /** Creates `path`; the new file's fnode is the op's seq_no. */
  create(path: string): RecordedFrame & { fnode: bigint } {
    const op = this.next({ create: { path } });
    return { ...this.emit(op), fnode: op.seq_no };
  }

  /** Writes `data` at `offset` of the file. */
  write(fnode: bigint, data: Uint8Array, offset: bigint): RecordedFrame {
    return this.emit(this.next({ write: { fnode, offset, length: BigInt(data.length) } }), data);
  }

  link(fnode: bigint, path: string): RecordedFrame {
    return this.emit(this.next({ link: { fnode, path } }));
  }

  unlink(fnode: bigint, path: string): RecordedFrame {
    return this.emit(this.next({ unlink: { fnode, path } }));
  }

  property(path: string, content: string): RecordedFrame {
    return this.emit(this.next({ property: { path, content } }));
  }

  /** A no-op (what a writer taking a log over appends first). */
  noop(): RecordedFrame {
    return this.emit(this.next({}));
  }

  /** Reports a committed write head (the lower bound of the next ops' offsets). */
  observeHead(head: bigint): void {
    if (head > this.writeHead) this.writeHead = head;
  }

  /** Hints of the writer's state (as a recorder stores them). */
  hints(): FSMHints {
    return this.fsm.buildHints(this.log);
  }
}

function body(op: RecordedOp): Partial<RecordedOp> {
  const out: Partial<RecordedOp> = {};
  for (const k of ['create', 'link', 'unlink', 'write', 'property'] as const) if (op[k]) (out as Record<string, unknown>)[k] = op[k];
  return out;
}

/** Where a writer's frames go: an append of whole frames, returning the new write head. */
export type AppendFrames = (log: string, bytes: Uint8Array) => Promise<bigint> | bigint;

/** Appends `frames` atomically for `writer` and reports the head to it. */
export async function commitFrames(append: AppendFrames, writer: LogWriter, frames: RecordedFrame[]): Promise<bigint> {
  const total = frames.reduce((n, f) => n + f.bytes.length, 0);
  const buf = new Uint8Array(total);
  let at = 0;
  for (const f of frames) {
    buf.set(f.bytes, at);
    at += f.bytes.length;
  }
  const head = await append(writer.log, buf);
  writer.observeHead(head);
  return head;
}

/**
 * Takes a log over for `author`: plays `hints` to the head, appends a no-op of the new author
 * continuing that state, and plays again to see it applied; retries (up to `attempts`) when
 * another writer's op got in first. Returns the writer, whose state includes its no-op.
 */
export async function takeOver(
  source: LogSource,
  append: AppendFrames,
  hints: FSMHints,
  author: number,
  opts: { attempts?: number; beforeAppend?: () => Promise<void> | void } = {},
): Promise<LogWriter> {
  const attempts = opts.attempts ?? 5;
  for (let i = 0; i < attempts; i++) {
    const played = await playFsm(source, hints);
    const head = played.heads.get(hints.log)!;
    const writer = new LogWriter({ log: hints.log, author, fsm: played.fsm, writeHead: head });
    const noop = writer.noop();
    await opts.beforeAppend?.();
    await commitFrames(append, writer, [noop]);
    const check = await playFsm(source, hints);
    if (check.fsm.nextSeqNo === writer.fsm.nextSeqNo && check.fsm.nextChecksum === writer.fsm.nextChecksum) return writer;
  }
  throw new RecoveryLogError(`could not take ${hints.log} over for author ${author} in ${attempts} attempts`);
}
