// `journals flush` in-process against scripted brokers: one serving protocol.Journal and our
// gazctl.flush.Flush, one serving protocol.Journal alone (as upstream brokers do). What the
// command sends, what it prints for each answer, and its exit codes.

import assert from 'node:assert/strict';
import { Server, ServerCredentials, type sendUnaryData, type ServerUnaryCall, type ServerWritableStream } from '@grpc/grpc-js';
import { after, before, beforeEach, describe, it } from 'node:test';

import {
  FragmentsResponse,
  JournalService,
  JournalSpec_Suspend_Level,
  ListResponse,
  Status,
  type Fragment,
  type FragmentsRequest,
  type ListRequest,
  type ListResponse_Journal,
} from '../../../src/lib/protocol/gen/broker/protocol.js';
import { FlushResponse, FlushService, type FlushRequest } from '../../../src/lib/protocol/gen/gazctl/flush.js';
import { FlushClient, FlushUnsupportedError } from '../../../src/lib/client/flush-client.js';
import { startJournalStub, stubHeader, type StubServer } from '../../../src/testing/stubs.js';
import { describeInProcess, runInProcess, type InProcessResult } from '../../helpers/inproc.js';

const JOURNALS = ['ops/full', 'ops/empty', 'ops/busy', 'ops/refused', 'ops/slow-index', 'ops/nostore'];

function entry(name: string): ListResponse_Journal {
  return {
    spec: {
      name,
      replication: 1,
      labels: { labels: [{ name: 'app', value: 'ops', prefix: false }] },
      fragment: undefined,
      flags: 0,
      max_append_rate: 0n,
      suspend: name === 'ops/full' ? { level: JournalSpec_Suspend_Level.FULL, offset: 10n } : undefined,
    },
    mod_revision: 10n,
    route: { members: [{ zone: 'local', suffix: 'stub' }], primary: 0, endpoints: [] },
    create_revision: 1n,
  };
}

function frag(journal: string, begin: bigint, end: bigint, store = 'file:///', modTime = 1764547200n): Fragment {
  return { journal, begin, end, sum: { part1: 1n, part2: 2n, part3: 3 }, compression_codec: 1, backing_store: store, mod_time: modTime, path_postfix: '' };
}

function listHandler(call: ServerWritableStream<ListRequest, ListResponse>): void {
  const inc = call.request.selector?.include?.labels ?? [];
  const wanted = inc.filter((l) => l.name === 'name').map((l) => l.value);
  const picked = inc.some((l) => l.name === 'app' && l.value === 'none') ? [] : JOURNALS.filter((j) => wanted.length === 0 || wanted.includes(j));
  call.write(ListResponse.fromPartial({ status: Status.OK, header: stubHeader({ revision: 100n }), journals: picked.map(entry) }));
  call.end();
}

let flushes: FlushRequest[] = [];
let fragmentLists = 0;

async function startFlushBroker(): Promise<{ address: string; stop(): void }> {
  const server = new Server();
  server.addService(JournalService, {
    list: listHandler,
    listFragments: (call: ServerUnaryCall<FragmentsRequest, FragmentsResponse>, cb: sendUnaryData<FragmentsResponse>) => {
      // ops/slow-index: the first listing still shows the flushed spool as local.
      fragmentLists++;
      const j = call.request.journal;
      const fragments = j === 'ops/slow-index' && fragmentLists === 1 ? [frag(j, 0n, 64n, '', 0n)] : [frag(j, 0n, 64n)];
      cb(null, FragmentsResponse.fromPartial({ status: Status.OK, header: stubHeader(), fragments: fragments.map((spec) => ({ spec, signed_url: '' })) }));
    },
  } as never);
  server.addService(FlushService, {
    flush: (call: ServerUnaryCall<FlushRequest, FlushResponse>, cb: sendUnaryData<FlushResponse>) => {
      const j = call.request.journal;
      flushes.push(call.request);
      const ok = (r: Partial<FlushResponse>) => cb(null, FlushResponse.fromPartial({ status: Status.OK, header: stubHeader(), ...r }));
      if (j === 'ops/refused') return cb(null, FlushResponse.fromPartial({ status: Status.NOT_ALLOWED, header: stubHeader() }));
      if (j === 'ops/empty') return ok({ rolled: false, write_head: 100n, fragment: frag(j, 40n, 100n) });
      if (j === 'ops/nostore') return ok({ rolled: true, write_head: 30n, fragment: frag(j, 0n, 30n, '', 0n) });
      ok({ rolled: true, write_head: 64n, fragment: frag(j, 0n, 64n) });
    },
  } as never);
  const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));
  return { address: `http://127.0.0.1:${port}`, stop: () => server.forceShutdown() };
}

let ours: { address: string; stop(): void };
let upstream: StubServer;

before(async () => {
  ours = await startFlushBroker();
  upstream = await startJournalStub({ list: listHandler } as never);
});
after(async () => {
  ours.stop();
  await upstream.stop();
});
beforeEach(() => {
  flushes = [];
  fragmentLists = 0;
});

const run = (address: string, args: string[]): Promise<InProcessResult> => runInProcess(args, { env: { BROKER_ADDRESS: address } });

function oneLine(args: string[], r: InProcessResult): string {
  const lines = r.stderr.split('\n');
  assert.equal(lines.length, 2, `one line on stderr\n${describeInProcess(args, r)}`);
  assert.equal(lines[1], '');
  return lines[0]!;
}

describe('journals flush', () => {
  it('flushes each selected journal and prints its persisted fragment; fully suspended journals are skipped', async () => {
    const args = ['journals', 'flush', '-l', 'name in (ops/full, ops/empty, ops/busy, ops/nostore)'];
    const r = await run(ours.address, args);
    assert.equal(r.code, 0, describeInProcess(args, r));
    assert.deepEqual(flushes.map((f) => f.journal).sort(), ['ops/busy', 'ops/empty', 'ops/nostore']);
    for (const f of flushes) assert.equal(f.do_not_proxy, false);
    const lines = r.stdout.split('\n');
    const row = (j: string) => lines.find((l) => l.includes(` ${j} `)) ?? '';
    const busy = row('ops/busy');
    assert.match(busy, /ops\/busy\/0000000000000000-0000000000000040-0000000000000001000000000000000200000003\.raw/);
    assert.match(busy, /│ 0 +│ 64 +│ file:\/\/\/ +│ 2025-12-01T00:00:00Z +│ flushed /);
    assert.match(row('ops/empty'), /│ 40 +│ 100 +│.*\(empty spool\)/);
    assert.match(row('ops/nostore'), /\(none\).*closed \(the journal has no store\)/);
    assert.match(row('ops/full'), /fully suspended \(nothing to flush\)/);
    assert.match(lines[1] ?? '', /JOURNAL.*FRAGMENT.*BEGIN.*END.*STORE.*MOD TIME.*RESULT/);
  });

  it('-o json prints one object per journal, 64-bit numbers exact', async () => {
    const args = ['journals', 'flush', '-l', 'name in (ops/busy, ops/empty, ops/full)', '-o', 'json'];
    const r = await run(ours.address, args);
    assert.equal(r.code, 0, describeInProcess(args, r));
    const byName = new Map(
      r.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { journal: string })
        .map((o) => [o.journal, o]),
    );
    assert.deepEqual(byName.get('ops/busy'), {
      journal: 'ops/busy',
      result: 'flushed',
      write_head: 64,
      fragment: { name: 'ops/busy/0000000000000000-0000000000000040-0000000000000001000000000000000200000003.raw', begin: 0, end: 64, backing_store: 'file:///', mod_time: 1764547200 },
    });
    assert.deepEqual(byName.get('ops/empty'), {
      journal: 'ops/empty',
      result: 'empty',
      write_head: 100,
      fragment: { name: 'ops/empty/0000000000000028-0000000000000064-0000000000000001000000000000000200000003.raw', begin: 40, end: 100, backing_store: 'file:///', mod_time: 1764547200 },
    });
    assert.deepEqual(byName.get('ops/full'), { journal: 'ops/full', result: 'suspended' });
  });

  it('exits 1 naming the journal it could not flush, after printing the others', async () => {
    const args = ['journals', 'flush', '-l', 'name in (ops/busy, ops/refused)'];
    const r = await run(ours.address, args);
    assert.equal(r.code, 1, describeInProcess(args, r));
    const line = oneLine(args, r);
    assert.match(line, /could not flush 1 of 2 journals: ops\/refused .*NOT_ALLOWED/);
    assert.match(r.stdout, /ops\/busy .*flushed/);
    assert.match(r.stdout, /ops\/refused .*failed: .*NOT_ALLOWED/);
  });

  it('--wait lists the fragments again until the flushed range shows as persisted', async () => {
    const args = ['journals', 'flush', '-l', 'name=ops/slow-index', '--wait'];
    const r = await run(ours.address, args);
    assert.equal(r.code, 0, describeInProcess(args, r));
    assert.equal(fragmentLists, 2, 'one listing with the local fragment, then one with it persisted');
    // Without --wait, the command does not list fragments at all.
    fragmentLists = 0;
    const plain = await run(ours.address, ['journals', 'flush', '-l', 'name=ops/slow-index']);
    assert.equal(plain.code, 0);
    assert.equal(fragmentLists, 0);
  });

  it('against a broker without the flush service: exit 1, one line naming the missing feature and fragment.flush_interval', async () => {
    const args = ['journals', 'flush', '-l', 'name in (ops/busy, ops/empty)'];
    const r = await run(upstream.address, args);
    assert.equal(r.code, 1, describeInProcess(args, r));
    const line = oneLine(args, r);
    assert.match(line, /lacks on-demand flush/);
    assert.match(line, /fragment\.flush_interval/);
    assert.equal(r.stdout, '');
  });

  it('bad inputs: one line on stderr, exit 2 for usage and 1 when nothing matches', async () => {
    const cases: [string[], number, RegExp][] = [
      [['journals', 'flush'], 2, /selector|-l/i],
      [['journals', 'flush', '-l', 'name=ops/busy', '-o', 'yaml'], 2, /yaml|format/i],
      [['journals', 'flush', '-l', 'bad label!=='], 2, /selector|label/i],
      [['journals', 'flush', '-l', 'name=ops/busy', '--wait', 'maybe'], 2, /maybe/],
      [['journals', 'flush', '-l', 'app=none'], 1, /no journals match selector/],
    ];
    for (const [args, code, re] of cases) {
      const r = await run(ours.address, args);
      assert.equal(r.code, code, describeInProcess(args, r));
      assert.match(oneLine(args, r), re);
    }
    assert.deepEqual(flushes, []);
  });
});

describe('FlushClient', () => {
  it('turns gRPC UNIMPLEMENTED into FlushUnsupportedError', async () => {
    const c = new FlushClient({ address: upstream.address }, { timeoutMs: 5000 });
    try {
      await assert.rejects(c.flush('ops/busy'), (e: unknown) => e instanceof FlushUnsupportedError && e.journal === 'ops/busy');
    } finally {
      c.close();
    }
  });

  it('resolves with what the primary flushed', async () => {
    const c = new FlushClient({ address: ours.address }, { timeoutMs: 5000 });
    try {
      const r = await c.flush('ops/busy');
      assert.equal(r.rolled, true);
      assert.equal(r.writeHead, 64n);
      assert.equal(r.fragment?.end, 64n);
      assert.equal(r.fragment?.backing_store, 'file:///');
    } finally {
      c.close();
    }
  });
});
