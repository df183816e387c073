// Unit tests of `gazctl health`'s checks and report (src/cli/health.ts) on stub probes, and of
// the command in-process: usage errors, and a "broker" that accepts connections and never answers.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';

import {
  checkHealth,
  checkLine,
  problemKey,
  renderJson,
  renderText,
  someNames,
  summaryLine,
  type HealthProbes,
} from '../../../src/cli/health.js';
import { decodeStatusResponse, type EtcdMemberStatus } from '../../../src/lib/keyspace/status.js';
import { JournalSpec_Suspend_Level, type ListResponse_Journal } from '../../../src/lib/protocol/gen/broker/protocol.js';
import { ReplicaStatus_Code, type ListResponse_Shard } from '../../../src/lib/protocol/gen/consumer/protocol.js';
import { BinaryWriter } from '@bufbuild/protobuf/wire';
import { describeInProcess, runInProcess } from '../../helpers/inproc.js';
import { startStubBroker, type StubBroker } from '../../helpers/stub-broker.js';

const B1 = 'http://b1:8080';
const B2 = 'http://b2:8080';
const C1 = 'http://c1:9000';

function route(eps: string[], primary = 0) {
  return { members: eps.map((e) => ({ zone: 'z', suffix: new URL(e).hostname })), primary, endpoints: eps };
}

function journal(name: string, eps: string[], o: { primary?: number; replication?: number; stores?: string[]; suspend?: JournalSpec_Suspend_Level } = {}): ListResponse_Journal {
  return {
    spec: {
      name,
      replication: o.replication ?? eps.length,
      labels: { labels: [] },
      fragment: { length: 0n, compression_codec: 0, stores: o.stores ?? [], refresh_interval: undefined, retention: undefined, flush_interval: undefined, path_postfix_template: '' } as never,
      flags: 0,
      max_append_rate: 0n,
      suspend: o.suspend === undefined ? undefined : { level: o.suspend, offset: 0n },
    },
    mod_revision: 1n,
    route: route(eps, o.primary ?? (eps.length ? 0 : -1)),
    create_revision: 1n,
  };
}

function shard(id: string, eps: string[], codes: ReplicaStatus_Code[], o: { primary?: number; disable?: boolean; errors?: string[] } = {}): ListResponse_Shard {
  return {
    spec: { id, disable: o.disable ?? false } as never,
    mod_revision: 1n,
    route: route(eps, o.primary ?? (eps.length ? 0 : -1)),
    status: codes.map((code) => ({ code, errors: code === ReplicaStatus_Code.FAILED ? (o.errors ?? []) : [] })),
    create_revision: 1n,
  };
}

const never = (signal: AbortSignal) =>
  new Promise<never>((_, reject) => signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true }));

function probes(over: Partial<HealthProbes> = {}): HealthProbes & { pinged: string[] } {
  const pinged: string[] = [];
  return {
    pinged,
    brokerAddress: B1,
    consumerAddress: undefined,
    etcdEndpoints: [],
    listJournals: async () => [journal('a/one', [B1, B2], { stores: ['file:///s/'] }), journal('a/two', [B2, B1], { stores: ['file:///s/'] })],
    pingBroker: async (ep) => void pinged.push(ep),
    listShards: async () => [],
    pingConsumer: async (ep) => void pinged.push(ep),
    etcdStatus: async (ep) => ({ endpoint: ep, memberId: 'a1', leader: 'a1', version: '3.6.5', raftTerm: 2n, errors: [], isLearner: false }),
    storeHealth: async () => undefined,
    ...over,
  };
}

const soon = () => Date.now() + 2000;

describe('health report', () => {
  it('healthy: every route member pinged once (the configured one not again), stores deduplicated', async () => {
    const p = probes();
    const r = await checkHealth(p, soon());
    assert.equal(r.healthy, true, renderText(r, true));
    assert.deepEqual(p.pinged, [B2]);
    assert.deepEqual(r.counts, { brokers: 2, journals: 2, consumers: 0, shards: 0, stores: 1, etcd: 0 });
    assert.equal(summaryLine(r), 'healthy: 2 brokers, 2 journals, 1 store, consumers not checked, etcd not checked');
    const text = renderText(r, false);
    assert.equal(text, 'healthy: 2 brokers, 2 journals, 1 store, consumers not checked, etcd not checked\n');
    const verbose = renderText(r, true);
    assert.match(verbose, /^skipped: etcd: not checked: no etcd address/m);
    assert.match(verbose, /^ok: store file:\/\/\/s\/: healthy$/m);
    const doc = JSON.parse(renderJson(r)) as { healthy: boolean; etcd_checked: boolean; checks: { component: string; state: string; detail: string }[] };
    assert.equal(doc.healthy, true);
    assert.equal(doc.etcd_checked, false);
    assert.ok(doc.checks.some((c) => c.component === 'etcd' && c.state === 'skipped' && /not checked/.test(c.detail)));
  });

  it('journals without a primary and short of replication are counted, a few named; suspended ones excused', async () => {
    const js = [
      journal('j/1', [], { replication: 2 }),
      journal('j/2', [B1], { replication: 3 }),
      journal('j/3', [B1], { replication: 3, primary: -1 }),
      journal('j/4', [], { replication: 3 }),
      journal('j/5', [], { replication: 3 }),
      journal('j/full', [], { replication: 3, suspend: JournalSpec_Suspend_Level.FULL }),
      journal('j/partial', [B1], { replication: 3, suspend: JournalSpec_Suspend_Level.PARTIAL }),
    ];
    const r = await checkHealth(probes({ listJournals: async () => js }), soon());
    assert.equal(r.healthy, false);
    const lines = renderText(r, false).trimEnd().split('\n');
    assert.deepEqual(lines, [
      'journals: 4 without a primary broker: j/1, j/3, j/4 and 1 more',
      'journals: 5 with fewer brokers than their replication: j/1 (0 of 2), j/2 (1 of 3), j/3 (1 of 3) and 2 more',
      'unhealthy: 2 problems',
    ]);
  });

  it('an unreachable member, an unhealthy store and a refused List are each one line naming the component', async () => {
    const r = await checkHealth(
      probes({
        pingBroker: async () => {
          throw new Error('broker http://b2:8080 is unreachable: connect ECONNREFUSED');
        },
        storeHealth: async () => 'open /s/.test: no such file or directory\nmore',
      }),
      soon(),
    );
    assert.deepEqual(r.checks.filter((c) => c.state === 'problem').map(checkLine), [
      'broker z/b2 (http://b2:8080): List failed: unreachable: connect ECONNREFUSED',
      'store file:///s/: unhealthy: open /s/.test: no such file or directory; more',
    ]);
    const down = await checkHealth(probes({ listJournals: async () => Promise.reject(new Error('refused')) }), soon());
    assert.deepEqual(renderText(down, true).trimEnd().split('\n'), [
      'broker http://b1:8080: List failed: refused',
      'skipped: store: not checked: no journal listing',
      'skipped: consumer: not checked: no consumer address (--consumer.address, CONSUMER_ADDRESS or gazctl.ini)',
      'skipped: etcd: not checked: no etcd address (--etcd.address, ETCD_ADDRESS or gazctl.ini [etcd] Address)',
      'unhealthy: 1 problem',
    ]);
  });

  it('probes that never answer are abandoned at the deadline (their signal aborted) and reported', async () => {
    const aborted: string[] = [];
    const hang = (what: string) => (_: unknown, signal?: AbortSignal) => {
      const s = (signal ?? _) as AbortSignal;
      s.addEventListener('abort', () => aborted.push(what), { once: true });
      return never(s);
    };
    const r = await checkHealth(
      probes({
        consumerAddress: C1,
        etcdEndpoints: ['http://e1:2379'],
        listJournals: hang('list') as HealthProbes['listJournals'],
        listShards: hang('shards') as HealthProbes['listShards'],
        etcdStatus: hang('etcd') as HealthProbes['etcdStatus'],
      }),
      Date.now() + 50,
    );
    assert.deepEqual(aborted.sort(), ['etcd', 'list', 'shards']);
    const lines = r.checks.filter((c) => c.state === 'problem').map(checkLine);
    assert.equal(lines.length, 3, lines.join('\n'));
    assert.match(lines[0]!, /^broker http:\/\/b1:8080: List did not answer within \d+ms$/);
    assert.match(lines[1]!, /^consumer http:\/\/c1:9000: List did not answer within \d+ms$/);
    assert.match(lines[2]!, /^etcd http:\/\/e1:2379: Status did not answer within \d+ms$/);
  });

  it('consumers: FAILED replicas with their errors, enabled shards without a primary, members pinged', async () => {
    const p = probes({
      consumerAddress: C1,
      listShards: async () => [
        shard('s-0', [C1, 'http://c2:9000'], [ReplicaStatus_Code.PRIMARY, ReplicaStatus_Code.FAILED], { errors: ['boom\nat x'] }),
        shard('s-1', [], [], {}),
        shard('s-2', [], [], { disable: true }),
        shard('s-3', [C1], [ReplicaStatus_Code.PRIMARY]),
        shard('s-4', [C1], [ReplicaStatus_Code.BACKFILL]),
        shard('s-5', [C1], [ReplicaStatus_Code.FAILED], { errors: ['gone'] }),
      ],
    });
    const r = await checkHealth(p, soon());
    assert.deepEqual(p.pinged.sort(), [B2, 'http://c2:9000']);
    assert.equal(r.counts.consumers, 2);
    assert.equal(r.counts.shards, 6);
    assert.deepEqual(renderText(r, false).trimEnd().split('\n'), [
      'shards: 2 enabled without a serving primary: s-1, s-4 (primary z/c1 is BACKFILL)',
      'shard s-0: FAILED on z/c2: boom; at x',
      'shard s-5: FAILED on z/c1: gone',
      'unhealthy: 3 problems',
    ]);
    const ok = await checkHealth(probes({ consumerAddress: C1, listShards: async () => [shard('s-3', [C1], [ReplicaStatus_Code.PRIMARY])] }), soon());
    assert.equal(summaryLine(ok), 'healthy: 2 brokers, 2 journals, 1 store, 1 consumer, 1 shard, etcd not checked');
  });

  it('consumers: a serving primary with unread input must read through one more record before the deadline', async () => {
    const src = (id: string, journals: string[]) => ({ ...shard(id, [C1], [ReplicaStatus_Code.PRIMARY]), spec: { id, disable: false, sources: journals.map((journal) => ({ journal })) } as never });
    const stats: string[] = [];
    const p = probes({
      consumerAddress: C1,
      listShards: async () => [src('s-stuck', ['in/a']), src('s-busy', ['in/b']), src('s-idle', ['in/c']), shard('s-standby', [C1], [ReplicaStatus_Code.STANDBY])],
      writeHead: async (j) => ({ 'in/a': 20n, 'in/b': 50n, 'in/c': 7n })[j]!,
      statShard: async (id, readThrough, signal) => {
        stats.push(`${id} ${JSON.stringify(Object.fromEntries(Object.entries(readThrough).map(([k, v]) => [k, Number(v)])))}`);
        if (id === 's-stuck' && Object.keys(readThrough).length) return never(signal);
        const at: Record<string, Record<string, bigint>> = { 's-stuck': { 'in/a': 10n }, 's-busy': { 'in/b': 40n }, 's-idle': { 'in/c': 7n } };
        return at[id]!;
      },
    });
    const r = await checkHealth(p, Date.now() + 300);
    assert.equal(r.healthy, false);
    const problems = r.checks.filter((c) => c.state === 'problem').map(checkLine);
    assert.equal(problems.length, 2, problems.join('\n')); // s-stuck; s-standby has no serving primary
    assert.match(problems.find((l) => l.startsWith('shard s-stuck'))!, /^shard s-stuck: made no progress within \d+ms \(primary z\/c1\): in\/a read through 10 of 20$/);
    // Caught up (s-idle): one Stat; behind (s-busy, s-stuck): a second one for one record more.
    assert.deepEqual(stats.sort(), ['s-busy {"in/b":41}', 's-busy {}', 's-idle {}', 's-stuck {"in/a":11}', 's-stuck {}']);

    const ok = await checkHealth(probes({ ...p, listShards: async () => [src('s-busy', ['in/b']), src('s-idle', ['in/c'])] }), soon());
    assert.equal(ok.healthy, true, renderText(ok, true));
    assert.ok(ok.checks.some((c) => checkLine(c) === 'shards: 2 serving primaries: 1 with unread input made progress, 1 caught up'), renderText(ok, true));
  });

  it('etcd: a member without a leader or with an alarm is a problem; healthy members count', async () => {
    const status = (ep: string, s: Partial<EtcdMemberStatus>): EtcdMemberStatus => ({ endpoint: ep, memberId: '1', leader: '1', version: '3.6.5', raftTerm: 1n, errors: [], isLearner: false, ...s });
    const r = await checkHealth(
      probes({
        etcdEndpoints: ['http://e1:2379', 'http://e2:2379', 'http://e3:2379'],
        etcdStatus: async (ep) => (ep.includes('e1') ? status(ep, {}) : ep.includes('e2') ? status(ep, { memberId: '2', leader: undefined, errors: ['etcdserver: no leader'] }) : status(ep, { memberId: '3', errors: ['memberID:3 alarm:NOSPACE '] })),
      }),
      soon(),
    );
    assert.deepEqual(r.checks.filter((c) => c.state === 'problem').map(checkLine), [
      'etcd http://e2:2379: member 2 has no leader',
      'etcd http://e3:2379: member 3 reports: memberID:3 alarm:NOSPACE ',
    ]);
    const ok = await checkHealth(probes({ etcdEndpoints: ['http://e1:2379'] }), soon());
    assert.match(summaryLine(ok), /, 1 etcd member$/);
  });

  it('the --watch key is the set of problem lines, whatever order the probes finished in', async () => {
    const a = await checkHealth(probes({ storeHealth: async () => 'x', pingBroker: async () => Promise.reject(new Error('y')) }), soon());
    const b = await checkHealth(
      probes({
        storeHealth: async () => 'x',
        pingBroker: () => new Promise((_, rej) => setTimeout(() => rej(new Error('y')), 5)),
      }),
      soon(),
    );
    assert.equal(problemKey(a), problemKey(b));
    assert.notEqual(problemKey(a), problemKey(await checkHealth(probes(), soon())));
    assert.equal(someNames(['a', 'b']), 'a, b');
  });

  it('decodes an etcd StatusResponse: member id and leader in hex, 0 = no leader, errors', () => {
    const w = new BinaryWriter();
    w.uint32((1 << 3) | 2).bytes(new BinaryWriter().uint32(1 << 3).uint64(7n).uint32(2 << 3).uint64(0x8e9e05c52164694dn).uint32(4 << 3).uint64(3n).finish());
    w.uint32((2 << 3) | 2).string('3.6.5');
    w.uint32(4 << 3).uint64(0x8e9e05c52164694dn);
    w.uint32(6 << 3).uint64(5n);
    w.uint32((8 << 3) | 2).string('NOSPACE');
    w.uint32(10 << 3).bool(false);
    const s = decodeStatusResponse(w.finish(), 'http://e:2379');
    assert.deepEqual(s, { endpoint: 'http://e:2379', memberId: '8e9e05c52164694d', leader: '8e9e05c52164694d', version: '3.6.5', raftTerm: 5n, errors: ['NOSPACE'], isLearner: false });
    const none = new BinaryWriter().uint32((2 << 3) | 2).string('3.6.5').finish();
    assert.equal(decodeStatusResponse(none).leader, undefined);
  });
});

describe('health command in-process', () => {
  let silent: Server;
  let address = '';
  const sockets = new Set<Socket>();
  before(async () => {
    // Accepts connections and never says a word: no HTTP/2 settings, no answer.
    silent = createServer((s) => {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
    });
    await new Promise<void>((res) => silent.listen(0, '127.0.0.1', res));
    const a = silent.address();
    address = `http://127.0.0.1:${typeof a === 'object' && a ? a.port : 0}`;
  });
  after(async () => {
    for (const s of sockets) s.destroy();
    await new Promise((res) => silent.close(res));
  });

  it('usage errors exit 2 with one line', async () => {
    for (const [args, re] of [
      [['health', '--watch', '--exit-when-healthy'], /--watch and --exit-when-healthy do not go together/],
      [['health', '--timeout', '0s'], /--timeout must be more than 0/],
      [['health', '--interval', 'x'], /--interval: invalid duration/],
      [['health', '--etcd.address', 'ftp://e:1'], /--etcd\.address: .*unsupported scheme/],
      [['health', '-o', 'yaml'], /yaml/],
    ] as const) {
      const r = await runInProcess([...args]);
      assert.equal(r.code, 2, describeInProcess([...args], r));
      assert.match(r.stderr, re);
      assert.equal(r.stderr.trimEnd().split('\n').length, 1, r.stderr);
    }
  });

  it('ETCD_ADDRESS is a comma list, checked like the flag (a bad one is a usage error naming it)', async () => {
    const r = await runInProcess(['health'], { env: { ETCD_ADDRESS: 'http://127.0.0.1:1,nope' } });
    assert.equal(r.code, 2, describeInProcess(['health'], r));
    assert.match(r.stderr, /--etcd\.address: .*"nope".*\(from \$ETCD_ADDRESS\)/);
  });

  it('a broker that accepts connections and never answers is a problem at --timeout, exit 1', async () => {
    const args = ['health', '--broker.address', address, '--timeout', '2s'];
    const r = await runInProcess(args);
    assert.equal(r.code, 1, describeInProcess(args, r));
    assert.match(r.stdout, new RegExp(`^broker ${address.replace(/[.:/]/g, '\\$&')}: List did not answer within [\\d.]+m?s$`, 'm'));
    assert.match(r.stdout, /^unhealthy: 1 problem\n$/m);
  });

  it('-o json with a dead etcd endpoint: one document, etcd checked and failing', async () => {
    const args = ['health', '--broker.address', address, '--timeout', '2s', '-o', 'json', '--etcd.address', 'http://127.0.0.1:1'];
    const r = await runInProcess(args);
    assert.equal(r.code, 1, describeInProcess(args, r));
    const doc = JSON.parse(r.stdout) as { healthy: boolean; etcd_checked: boolean; problems: { component: string; line: string }[] };
    assert.equal(doc.healthy, false);
    assert.equal(doc.etcd_checked, true);
    assert.deepEqual(doc.problems.map((p) => p.component).sort(), ['broker', 'etcd']);
  });

  it('gazctl.ini: the broker from [journals.Broker], the consumer from [shards.Consumer], etcd from [etcd], options from [health]', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gazctl-health-ini-'));
    try {
      writeFileSync(
        join(dir, 'gazctl.ini'),
        `[journals.Broker]\nAddress = ${address}\n\n[shards.Consumer]\nAddress = http://127.0.0.1:1\n\n[etcd]\nAddress = http://127.0.0.1:1, http://127.0.0.1:2\n\n[health]\nFormat = json\n`,
      );
      const r = await runInProcess(['health', '--timeout', '2s'], { cwd: dir });
      assert.equal(r.code, 1, describeInProcess(['health'], r));
      const doc = JSON.parse(r.stdout) as { consumers_checked: boolean; etcd_checked: boolean; problems: { line: string }[] };
      assert.equal(doc.consumers_checked, true);
      assert.equal(doc.etcd_checked, true);
      const lines = doc.problems.map((p) => p.line);
      assert.equal(lines.length, 4, lines.join('\n'));
      assert.ok(lines[0]!.startsWith(`broker ${address}: List did not answer`), lines[0]);
      assert.ok(lines[1]!.startsWith('consumer http://127.0.0.1:1: List failed: '), lines[1]);
      assert.ok(lines[2]!.startsWith('etcd http://127.0.0.1:1: Status failed: '), lines[2]);
      assert.ok(lines[3]!.startsWith('etcd http://127.0.0.1:2: Status failed: '), lines[3]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('--watch on a healthy (stub) broker prints one report however many rounds run, and Ctrl-C exits 0', async () => {
    const stub: StubBroker = await startStubBroker([{ name: 'acme/one', labels: { app: 'billing' }, content: '' }]);
    try {
      const outside = new Set(process.listeners('SIGINT'));
      let timer: NodeJS.Timeout | undefined;
      const interrupt = () => {
        for (const l of process.listeners('SIGINT')) if (!outside.has(l)) (l as () => void)();
      };
      const args = ['health', '--broker.address', stub.address, '--watch', '--interval', '10ms'];
      // Interrupted a while after the first report: many more rounds, none a change.
      const r = await runInProcess(args, { onStdout: () => (timer ??= setTimeout(interrupt, 300)) });
      assert.equal(r.code, 0, describeInProcess(args, r));
      const out = r.stdout.trimEnd().split('\n');
      assert.equal(out.length, 2, r.stdout);
      assert.match(out[0]!, /^--- \d{4}-\d\d-\d\dT/);
      assert.equal(out[1], 'healthy: 1 broker, 1 journal, 0 stores, consumers not checked, etcd not checked');
    } finally {
      await stub.stop();
    }
  });
});
