// Our Sequencer against Gazette's own (v0.103.0), run by the seq-oracle peer
// (scripts/peers/seq-oracle/main.go): seeded random histories of several journals and producers
// (transactions committed, rolled back, left pending; duplicates and re-sends; stale ACKs;
// producers whose clock goes back; messages without a UUID; unknown flags), read in a random
// interleaving, with checkpoints and restarts from them along the way and rings small enough to
// force replays. Both implementations run the same script; every outcome, dequeued message,
// read-through offset and producer state must be the same.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';

import { Sequencer, SequencerError, isCommitOutcome, type Envelope, type ProducerState } from '../../src/lib/message/sequencer.js';
import { MessageFlags, buildUUID, formatUUID, parseUUID } from '../../src/lib/message/uuid.js';
import { peerBinary } from '../../src/testing/peers.js';

/** mulberry32: a small seeded PRNG, so that a failing history can be reproduced from its seed. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** One random history as a script of the oracle's commands (see main.go). */
function history(seed: number): string[] {
  const r = prng(seed);
  const int = (lo: number, hi: number) => lo + Math.floor(r() * (hi - lo + 1));
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
  const journals = ['a/j0', 'a/j1', 'b/j2'].slice(0, int(1, 3));
  const producers = Array.from({ length: int(1, 4) }, (_, i) => Uint8Array.from([1, 0xaa, 0, 0, seed & 0xff, i]));
  const clocks = producers.map(() => BigInt(int(1, 4000)));
  const rings = [1, 2, 3, 5, 8, 64];
  const horizons = [0n, 1000n, 10_000n, 100_000n, 10n ** 15n];
  const content = new Map<string, { begin: bigint; end: bigint; uuid: string }[]>(journals.map((j) => [j, []]));
  const lines: string[] = [];
  const n = int(5, 80);
  for (let i = 0; i < n; i++) {
    const j = pick(journals);
    const msgs = content.get(j)!;
    const begin = msgs.length ? msgs[msgs.length - 1]!.end : 0n;
    const end = begin + BigInt(int(1, 50));
    const p = int(0, producers.length - 1);
    let uuid: Uint8Array;
    const roll = r();
    if (roll < 0.04) uuid = new Uint8Array(16); // no UUID
    else if (roll < 0.09 && msgs.length) uuid = parseUUID(pick(msgs).uuid); // an exact duplicate
    else {
      let flags: number;
      const f = r();
      if (f < 0.5) flags = MessageFlags.CONTINUE_TXN;
      else if (f < 0.78) flags = MessageFlags.ACK_TXN;
      else if (f < 0.97) flags = MessageFlags.OUTSIDE_TXN;
      else flags = 0x3; // unknown flags
      const c = r();
      if (c < 0.05) clocks[p] = clocks[p]! - BigInt(int(1, 300)); // the producer restarted behind
      else if (c < 0.15) {
        // same clock again
      } else clocks[p] = clocks[p]! + BigInt(int(1, 40));
      if (clocks[p]! < 1n) clocks[p] = 1n;
      let clock = clocks[p]!;
      if (flags === MessageFlags.ACK_TXN && r() < 0.2) clock = clock - BigInt(int(0, 60)); // an ACK of an earlier clock
      if (clock < 1n) clock = 1n;
      uuid = buildUUID(producers[p]!, clock, flags);
    }
    const m = { begin, end, uuid: formatUUID(uuid) };
    msgs.push(m);
    lines.push(`M ${j} ${begin} ${end} ${m.uuid}`);
  }
  lines.push(`N ${pick(rings)}`);
  const reads = n * 3 + 20;
  for (let i = 0; i < reads; i++) {
    const x = r();
    if (x < 0.03) lines.push(`C ${pick(horizons)}`);
    else if (x < 0.06) lines.push(`R ${pick(rings)} ${pick(horizons)}`);
    else lines.push(`Q ${pick(journals)}`);
  }
  lines.push(`C ${pick(horizons)}`);
  return lines;
}

/** Our side of the oracle: the same commands over our Sequencer, printing the same lines. */
function runOurs(script: string[]): string[] {
  const out: string[] = [];
  const content = new Map<string, Envelope<null>[]>();
  const cursor = new Map<string, number>();
  let seq: Sequencer<null> | undefined;
  let failed = false;
  const envText = (e: Envelope<null>) => `${e.journal} ${e.begin} ${e.end} ${formatUUID(e.uuid)}`;
  const step = (): boolean => {
    try {
      if (seq!.step()) out.push(`D ${envText(seq!.dequeued!)}`);
      else out.push('EOF');
      return true;
    } catch (e) {
      if (!(e instanceof SequencerError)) throw e;
      out.push('E');
      return false;
    }
  };
  const checkpoint = (horizon: bigint) => {
    out.push(`P ${seq!.hasPending()}`);
    const cp = seq!.checkpoint(horizon);
    for (const j of [...cp.offsets.keys()].sort()) out.push(`T ${j} ${cp.offsets.get(j)}`);
    const ss = cp.states.map((s) => `S ${s.journal} ${Buffer.from(s.producer).toString('hex')} ${s.lastAck} ${s.begin}`);
    out.push(...ss.sort());
    return cp;
  };
  const exec = (f: string[]): boolean => {
    switch (f[0]) {
      case 'N':
        seq = new Sequencer<null>(undefined, [], Number(f[1]));
        return true;
      case 'M': {
        const list = content.get(f[1]!) ?? [];
        content.set(f[1]!, list);
        list.push({ journal: f[1]!, begin: BigInt(f[2]!), end: BigInt(f[3]!), message: null, uuid: parseUUID(f[4]!) });
        return true;
      }
      case 'Q': {
        if (seq!.dequeued !== undefined) return step();
        const j = f[1]!;
        const i = cursor.get(j) ?? 0;
        const list = content.get(j) ?? [];
        if (i >= list.length) {
          out.push('-');
          return true;
        }
        cursor.set(j, i + 1);
        let outcome;
        try {
          outcome = seq!.queue({ ...list[i]! });
        } catch (e) {
          if (!(e instanceof SequencerError)) throw e;
          out.push('PANIC');
          return false;
        }
        out.push(`O ${outcome}`);
        if (outcome === 'ackCommitReplay') {
          const rr = seq!.replayRange();
          out.push(`RR ${rr.journal} ${rr.begin} ${rr.end}`);
          const items = (content.get(rr.journal) ?? []).filter((e) => e.begin >= rr.begin && e.end <= rr.end).map((e) => ({ ...e }));
          seq!.startReplay(items[Symbol.iterator]());
        }
        return isCommitOutcome(outcome) ? step() : true;
      }
      case 'C':
        checkpoint(BigInt(f[1]!));
        return true;
      case 'R': {
        const cp = checkpoint(BigInt(f[2]!));
        seq = new Sequencer<null>(cp.offsets, cp.states.map((s): ProducerState => ({ ...s })), Number(f[1]));
        for (const [j, list] of content) {
          const at = cp.offsets.get(j) ?? 0n;
          let i = 0;
          while (i < list.length && list[i]!.begin < at) i++;
          cursor.set(j, i);
        }
        return true;
      }
      default:
        throw new Error(`bad command ${f[0]}`);
    }
  };
  for (const line of script) {
    const f = line.split(' ');
    if (f[0] === 'X') {
      content.clear();
      cursor.clear();
      seq = undefined;
      failed = false;
      out.push('X');
      continue;
    }
    if (!failed && !exec(f)) failed = true;
  }
  return out;
}

function runGo(script: string[]): string[] {
  const res = spawnSync(peerBinary('seq-oracle'), ['sequence'], { input: script.join('\n') + '\n', maxBuffer: 1 << 28 });
  assert.equal(res.status, 0, `seq-oracle failed: ${res.stderr}`);
  return res.stdout.toString().trimEnd().split('\n');
}

/** Splits outputs at their X lines into per-history chunks. */
function perHistory(lines: string[]): string[][] {
  const out: string[][] = [];
  for (const l of lines) {
    if (l === 'X') out.push([]);
    else out[out.length - 1]!.push(l);
  }
  return out;
}

describe('Sequencer against Gazette v0.103.0 (seq-oracle)', () => {
  it('a hand-written history: commit, rollback, replay, restart', () => {
    const P = Uint8Array.from([1, 2, 3, 4, 5, 6]);
    const u = (clock: bigint, flags: number) => formatUUID(buildUUID(P, clock, flags));
    const script = [
      'X',
      `M a/j 0 10 ${u(100n, 1)}`,
      `M a/j 10 20 ${u(110n, 1)}`,
      `M a/j 20 30 ${u(120n, 2)}`,
      `M a/j 30 40 ${u(130n, 1)}`,
      `M a/j 40 50 ${u(120n, 2)}`,
      `M a/j 50 60 ${u(140n, 1)}`,
      `M a/j 60 70 ${u(150n, 2)}`,
      'N 1',
      ...Array(6).fill('Q a/j'), // the first sequence, through to its EOF
      'R 1 0',
      ...Array(12).fill('Q a/j'),
      'C 0',
    ];
    const go = runGo(script);
    assert.deepEqual(runOurs(script), go);
    // And what Go did is what we expect: both sequences committed once, the rolled-back one not.
    const dequeued = go.filter((l) => l.startsWith('D ')).map((l) => l.split(' ')[2]);
    assert.deepEqual(dequeued, ['0', '10', '20', '50', '60']);
  });

  it('400 seeded random histories give the same outcomes, messages, offsets and producer states', () => {
    const seeds = Array.from({ length: 400 }, (_, i) => 1000 + i);
    const script = seeds.flatMap((s) => ['X', ...history(s)]);
    const go = perHistory(runGo(script));
    const ours = perHistory(runOurs(script));
    assert.equal(go.length, seeds.length);
    assert.equal(ours.length, seeds.length);
    let dequeued = 0;
    let replays = 0;
    let restarts = 0;
    const outcomes = new Set<string>();
    for (let i = 0; i < seeds.length; i++) {
      assert.deepEqual(ours[i], go[i], `history of seed ${seeds[i]} differs`);
      dequeued += go[i]!.filter((l) => l.startsWith('D ')).length;
      replays += go[i]!.filter((l) => l.startsWith('RR ')).length;
      for (const l of go[i]!) if (l.startsWith('O ')) outcomes.add(l.slice(2));
      if (go[i]!.includes('E') || go[i]!.includes('PANIC')) restarts++;
    }
    // The histories exercise what they are meant to (not a test that passes on nothing).
    assert.ok(dequeued > 2000, `dequeued ${dequeued}`);
    assert.ok(replays > 50, `replays ${replays}`);
    assert.deepEqual([...outcomes].sort(), [
      'ackCommitReplay', 'ackCommitRing', 'ackEmpty', 'ackRollback', 'continueAlreadyAcked', 'continueBeginSpan',
      'continueExtendSpan', 'continueRingClockLarger', 'outsideAlreadyAcked', 'outsideCommit',
    ]);
    assert.equal(restarts, 0, 'no history ends in a Step error or panic');
  });
});
