// The playback state machine of a recovery log. It applies ops in order and only when they
// continue the history it holds: the op's seq_no and checksum must be the expected next ones
// (and, while hinted segments remain, its author the next segment's author). Everything else is
// a dead branch (a raced or fenced-off writer, a duplicate, a read from a lower-bound offset)
// and is left out. It tracks files (fnodes) by their links and the log segments holding their ops,
// so it can describe its own state as FSMHints at any point.
import type { FSMHints, FnodeSegments, Property, RecordedOp, Segment } from '../protocol/gen/recoverylog/recorded_op.js';
import { RecoveryLogError } from './framing.js';
import { crc32c } from './crc32c.js';
import { liveSegments } from './segments.js';
import { validateHints } from './hints.js';

/**
 * What `apply` did with an op. `applied`: a transition with local effect. `untracked`: a
 * transition (seq and checksum move on) for an fnode the hints say is gone later, so without
 * local effect. Anything else: no transition, for the reason named.
 */
export type ApplyOutcome =
  | 'applied'
  | 'untracked'
  | 'not-hinted-author'
  | 'wrong-seq-no'
  | 'checksum-mismatch'
  | 'expected-hinted-fnode'
  | 'link-exists'
  | 'property-exists'
  | 'no-such-link';

/** Whether the outcome moved the state machine on. */
export function transitioned(o: ApplyOutcome): boolean {
  return o === 'applied' || o === 'untracked';
}

export interface FnodeState {
  /** Current paths (hard links) of the file. */
  links: Set<string>;
  /** The log segments holding its ops, in order. */
  segments: Segment[];
}

export class FSM {
  /** Expected sequence number and checksum of the next op. */
  nextSeqNo = 1n;
  nextChecksum = 0;
  /** Log of the last op that moved the state on. */
  lastLog: string;
  /** Small files kept outside fnode tracking (e.g. /IDENTITY), by path. */
  readonly properties = new Map<string, string>();
  /** Live files by fnode (the seq_no of their create). */
  readonly liveNodes = new Map<bigint, FnodeState>();
  /** Paths of live files. */
  readonly links = new Map<string, bigint>();
  private hintedSegments: Segment[] = [];
  private segAt = 0;
  private hintedFnodes: bigint[] = [];
  private fnodeAt = 0;

  /**
   * A state machine ready to play `hints` (validated; throws ValidationError): it expects the
   * first hinted segment's first op, and knows which fnodes are still live at the hints' point.
   * Without live nodes it expects seq 1, checksum 0.
   */
  constructor(hints: FSMHints) {
    validateHints(hints);
    this.lastLog = hints.log;
    const segs = liveSegments(hints);
    this.hintedFnodes = hints.live_nodes.map((n) => n.fnode);
    if (segs.length > 0) {
      this.hintedSegments = segs;
      this.nextSeqNo = segs[0]!.first_seq_no;
      this.nextChecksum = segs[0]!.first_checksum;
    }
    for (const p of hints.properties) this.properties.set(p.path, p.content);
  }

  /** The hinted segments not yet played (copies), first the one being played. */
  remainingSegments(): Segment[] {
    return this.hintedSegments.slice(this.segAt).map((s) => ({ ...s }));
  }

  /** The next hinted segment still to play, if any. */
  get nextSegment(): Segment | undefined {
    return this.hintedSegments[this.segAt];
  }

  /** Whether hints remain unplayed (segments, or hinted fnodes not created yet). */
  hasRemainingHints(): boolean {
    return this.segAt < this.hintedSegments.length || this.fnodeAt < this.hintedFnodes.length;
  }

  /**
   * Applies `op` (meta-fields set by the reader) whose protobuf bytes, exactly as read, are
   * `payload`. The state changes only when the outcome is `applied` or `untracked`.
   */
  apply(op: RecordedOp, payload: Uint8Array): ApplyOutcome {
    const seg = this.hintedSegments[this.segAt];
    if (seg && seg.author !== op.author) return 'not-hinted-author';
    if (op.seq_no !== this.nextSeqNo) return 'wrong-seq-no';
    if (op.checksum !== this.nextChecksum) return 'checksum-mismatch';

    let outcome: ApplyOutcome;
    if (op.create) outcome = this.applyCreate(op);
    else if (this.fnodeAt < this.hintedFnodes.length && this.hintedFnodes[this.fnodeAt] === op.seq_no) outcome = 'expected-hinted-fnode';
    else if (op.link) outcome = this.applyLink(op);
    else if (op.unlink) outcome = this.applyUnlink(op);
    else if (op.write) outcome = this.touch(op, op.write.fnode);
    else if (op.property) outcome = this.applyProperty(op.property);
    else outcome = 'applied'; // a no-op (e.g. a hand-off)
    if (!transitioned(outcome)) return outcome;

    this.nextSeqNo++;
    this.nextChecksum = crc32c(payload, this.nextChecksum);
    this.lastLog = op.log;
    if (seg && seg.last_seq_no < this.nextSeqNo) {
      this.segAt++;
      const next = this.hintedSegments[this.segAt];
      if (next) {
        this.nextSeqNo = next.first_seq_no;
        this.nextChecksum = next.first_checksum;
      }
    }
    return outcome;
  }

  private applyCreate(op: RecordedOp): ApplyOutcome {
    const path = op.create!.path;
    if (this.links.has(path)) return 'link-exists';
    if (this.properties.has(path)) return 'property-exists';
    const fnode = op.seq_no;
    if (this.fnodeAt < this.hintedFnodes.length) {
      // While hinted fnodes remain, only the next hinted one is tracked; others die before the hints' point.
      if (this.hintedFnodes[this.fnodeAt] !== fnode) return 'untracked';
      this.fnodeAt++;
    } else if (this.segAt < this.hintedSegments.length) {
      // Created before the hints' point yet not hinted: it dies before that point, possibly by an op
      // the hinted segments leave out. (Go's FSM tracks it once the hinted fnodes are used up, and
      // then brings such a file back when its unlink lies between hinted segments.)
      return 'untracked';
    }
    const node: FnodeState = { links: new Set([path]), segments: [] };
    this.extend(node, op);
    this.liveNodes.set(fnode, node);
    this.links.set(path, fnode);
    return 'applied';
  }

  private applyLink(op: RecordedOp): ApplyOutcome {
    const { fnode, path } = op.link!;
    if (this.links.has(path)) return 'link-exists';
    if (this.properties.has(path)) return 'property-exists';
    const node = this.liveNodes.get(fnode);
    if (!node) return 'untracked';
    node.links.add(path);
    this.links.set(path, fnode);
    this.extend(node, op);
    return 'applied';
  }

  private applyUnlink(op: RecordedOp): ApplyOutcome {
    const { fnode, path } = op.unlink!;
    const node = this.liveNodes.get(fnode);
    if (!node) return 'untracked';
    if (!node.links.has(path)) return 'no-such-link';
    this.links.delete(path);
    node.links.delete(path);
    this.extend(node, op);
    if (node.links.size === 0) this.liveNodes.delete(fnode);
    return 'applied';
  }

  private touch(op: RecordedOp, fnode: bigint): ApplyOutcome {
    const node = this.liveNodes.get(fnode);
    if (!node) return 'untracked';
    this.extend(node, op);
    return 'applied';
  }

  private applyProperty(p: Property): ApplyOutcome {
    if (this.links.has(p.path)) return 'link-exists';
    // Before the hints' point the hinted properties are newer than any op: an older value read
    // inside a hinted segment must not replace them (Go's FSM lets it, when a later update lies
    // between hinted segments).
    if (this.segAt < this.hintedSegments.length) return 'untracked';
    this.properties.set(p.path, p.content);
    return 'applied';
  }

  private extend(node: FnodeState, op: RecordedOp): void {
    const last = node.segments[node.segments.length - 1];
    if (last && last.author === op.author && last.log === op.log) {
      last.last_seq_no = op.seq_no;
      last.last_offset = op.last_offset;
      return;
    }
    node.segments.push({
      author: op.author,
      first_seq_no: op.seq_no,
      first_offset: op.first_offset,
      first_checksum: op.checksum,
      last_seq_no: op.seq_no,
      last_offset: op.last_offset,
      log: op.log,
    });
  }

  /**
   * Hints that let a later playback of `log` rebuild this state: live nodes by increasing fnode
   * with their segments (a segment's log left empty when it is `log`), properties by path.
   */
  buildHints(log: string): FSMHints {
    const live_nodes: FnodeSegments[] = [...this.liveNodes.entries()]
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([fnode, st]) => ({ fnode, segments: st.segments.map((s) => ({ ...s, log: s.log === log ? '' : s.log })) }));
    const properties: Property[] = [...this.properties.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([path, content]) => ({ path, content }));
    return { log, live_nodes, properties };
  }

  /** A deep copy (e.g. to take a writer's state over). */
  clone(): FSM {
    const c = Object.create(FSM.prototype) as FSM;
    const mut = c as unknown as { [k: string]: unknown };
    mut.nextSeqNo = this.nextSeqNo;
    mut.nextChecksum = this.nextChecksum;
    mut.lastLog = this.lastLog;
    mut.properties = new Map(this.properties);
    mut.liveNodes = new Map([...this.liveNodes].map(([k, v]) => [k, { links: new Set(v.links), segments: v.segments.map((s) => ({ ...s })) }]));
    mut.links = new Map(this.links);
    mut.hintedSegments = this.hintedSegments.slice(this.segAt).map((s) => ({ ...s }));
    mut.segAt = 0;
    mut.hintedFnodes = this.hintedFnodes.slice(this.fnodeAt);
    mut.fnodeAt = 0;
    return c;
  }
}

/** Throws when `fsm` still has hints to play (playback cannot finish there). */
export function assertHintsPlayed(fsm: FSM, where: string): void {
  if (!fsm.hasRemainingHints()) return;
  const seg = fsm.nextSegment;
  throw new RecoveryLogError(
    seg
      ? `${where}: hinted segment ${seg.log}:${seg.first_offset} (seq ${seg.first_seq_no}..${seg.last_seq_no}, author ${seg.author}) was not played; possible data loss`
      : `${where}: a hinted file was never created; possible data loss`,
  );
}
