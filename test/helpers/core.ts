// Raw Journal RPCs and an append load for the core acceptance suites
// (test/integration/core-*.test.ts): one Append per record straight to a chosen broker, a
// non-blocking raw read of a whole journal, and a background stream of appends whose
// acknowledged ranges a test checks afterwards.

import assert from 'node:assert/strict';
import { credentials } from '@grpc/grpc-js';

import { AppendRequest, JournalClient, ReadRequest, type AppendResponse, type ReadResponse, Status } from '../../src/lib/protocol/gen/broker/protocol.js';
import { grpcTarget } from '../../src/testing/index.js';

/** One Append RPC to `endpoint`: resolves with the response, rejects on a gRPC error. */
export function appendOnce(endpoint: string, journal: string, data: Buffer, deadlineMs = 5000): Promise<AppendResponse> {
  const client = new JournalClient(grpcTarget(endpoint), credentials.createInsecure());
  return new Promise((resolve, reject) => {
    const call = client.append({ deadline: Date.now() + deadlineMs }, (err, res) => {
      client.close();
      if (err) reject(err);
      else resolve(res);
    });
    call.write(AppendRequest.fromPartial({ journal }));
    call.write(AppendRequest.fromPartial({ content: data }));
    call.write(AppendRequest.fromPartial({}));
    call.end();
  });
}

/** The journal's content as read (non-blocking) from offset 0, each chunk placed at its offset. */
export function readRaw(endpoint: string, journal: string): Promise<Buffer> {
  const client = new JournalClient(grpcTarget(endpoint), credentials.createInsecure());
  return new Promise((resolve, reject) => {
    const chunks: { offset: bigint; content: Buffer }[] = [];
    let head = 0n;
    const call = client.read(ReadRequest.fromPartial({ journal, offset: 0n, block: false }), { deadline: Date.now() + 30_000 });
    call.on('data', (r: ReadResponse) => {
      if (r.content.length > 0) chunks.push({ offset: r.offset, content: r.content });
      if (r.write_head > head) head = r.write_head;
    });
    call.on('error', (e) => {
      client.close();
      reject(e);
    });
    call.on('end', () => {
      client.close();
      const out = Buffer.alloc(Number(head));
      for (const ch of chunks) ch.content.copy(out, Number(ch.offset));
      resolve(out);
    });
  });
}

export interface Acked {
  begin: bigint;
  end: bigint;
  data: Buffer;
  /** Date.now() when the acknowledgement arrived. */
  at: number;
}

export interface AppendLoad {
  readonly acked: Acked[];
  /** Failed appends (a status other than OK, or a gRPC error), with the first few reasons. */
  readonly failures: { at: number; reason: string }[];
  /** Resolves once `pred` holds; fails the test after `timeoutMs`. */
  until(what: string, pred: () => boolean, timeoutMs: number): Promise<void>;
  /** Stop after the append in flight. */
  stop(): Promise<void>;
}

/**
 * Append small records to `journal`, one at a time, to the endpoints `endpoints()` returns
 * (round robin: any broker proxies to the primary) until stopped. Records are unique, so each
 * acknowledged range can be checked against what reads back.
 */
export function startAppendLoad(journal: string, endpoints: () => string[], opts: { deadlineMs?: number; tag?: string } = {}): AppendLoad {
  const acked: Acked[] = [];
  const failures: { at: number; reason: string }[] = [];
  let stopped = false;
  const loop = (async () => {
    for (let i = 0; !stopped; i++) {
      const eps = endpoints();
      const endpoint = eps[i % eps.length]!;
      const data = Buffer.from(`${opts.tag ?? 'load'} record ${i} `.padEnd(60, '.') + '\n');
      try {
        const r = await appendOnce(endpoint, journal, data, opts.deadlineMs ?? 3000);
        if (r.status === Status.OK) {
          acked.push({ begin: r.commit!.begin, end: r.commit!.end, data, at: Date.now() });
          continue;
        }
        failures.push({ at: Date.now(), reason: `${endpoint}: ${Status[r.status]}` });
      } catch (e) {
        failures.push({ at: Date.now(), reason: `${endpoint}: ${(e as Error).message}` });
      }
      await new Promise((res) => setTimeout(res, 50));
    }
  })();
  return {
    acked,
    failures,
    async until(what, pred, timeoutMs) {
      const deadline = Date.now() + timeoutMs;
      while (!pred()) {
        assert.ok(Date.now() < deadline, `timed out waiting for ${what}; ${acked.length} acknowledged, ${failures.length} failed (last: ${failures.at(-1)?.reason ?? 'none'})`);
        await new Promise((res) => setTimeout(res, 50));
      }
    },
    async stop() {
      stopped = true;
      await loop;
    },
  };
}

/** Every acknowledged range reads back with its bytes, and no range was acknowledged twice. */
export function assertAckedReadBack(content: Buffer, acked: Acked[], where = ''): void {
  const at = where ? ` (read through ${where})` : '';
  const ranges = new Set<string>();
  for (const a of acked) {
    assert.equal(a.end - a.begin, BigInt(a.data.length));
    const key = `${a.begin}-${a.end}`;
    assert.ok(!ranges.has(key), `range ${key} acknowledged twice`);
    ranges.add(key);
    assert.ok(a.end <= BigInt(content.length), `acknowledged range [${a.begin}, ${a.end}) is within the ${content.length} bytes read${at}`);
    assert.deepEqual(content.subarray(Number(a.begin), Number(a.end)), a.data, `acknowledged bytes at [${a.begin}, ${a.end})${at}`);
  }
}


/**
 * Read `journal` through `endpoint` until the read is whole (contiguous from offset 0 to at
 * least the end of the last acknowledged range), then check every acknowledged range. A broker
 * that just joined a route serves reads from its own fragment index, which learns of fragments
 * another broker persisted only at its next store refresh; meanwhile its read can stop short
 * (OFFSET_NOT_YET_AVAILABLE). That is a matter of time, not of loss, so the read is retried for
 * up to `timeoutMs` (default 30 s) before the check fails.
 */
export async function assertReadsBack(endpoint: string, journal: string, acked: Acked[], where: string, timeoutMs = 30_000): Promise<void> {
  const want = acked.reduce((m, a) => (a.end > m ? a.end : m), 0n);
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = await readWhole(endpoint, journal);
    if ((r.contiguousTo >= want) || Date.now() >= deadline) {
      assert.ok(r.contiguousTo >= want, `a read through ${where} reaches ${want} without a gap (it stopped at ${r.contiguousTo}, status ${r.lastStatus})`);
      assertAckedReadBack(r.content, acked, where);
      return;
    }
    await new Promise((res) => setTimeout(res, 250));
  }
}

/** A raw read from offset 0, with how far it is contiguous and the status it ended on. */
async function readWhole(endpoint: string, journal: string): Promise<{ content: Buffer; contiguousTo: bigint; lastStatus: string }> {
  const client = new JournalClient(grpcTarget(endpoint), credentials.createInsecure());
  return new Promise((resolve, reject) => {
    const chunks: { offset: bigint; content: Buffer }[] = [];
    let head = 0n;
    let next = 0n;
    let gap = false;
    let lastStatus = 'OK';
    const call = client.read(ReadRequest.fromPartial({ journal, offset: 0n, block: false }), { deadline: Date.now() + 30_000 });
    call.on('data', (r: ReadResponse) => {
      if (r.status !== Status.OK) lastStatus = Status[r.status] ?? String(r.status);
      if (r.write_head > head) head = r.write_head;
      if (r.content.length === 0) return;
      if (r.offset !== next) gap = true;
      chunks.push({ offset: r.offset, content: r.content });
      if (!gap) next = r.offset + BigInt(r.content.length);
    });
    call.on('error', (e) => {
      client.close();
      reject(e);
    });
    call.on('end', () => {
      client.close();
      const out = Buffer.alloc(Number(head > next ? head : next));
      for (const ch of chunks) ch.content.copy(out, Number(ch.offset));
      resolve({ content: out, contiguousTo: next, lastStatus });
    });
  });
}
