// The commands, run in-process against a stub broker: what they print and what they send.
// (End-to-end runs of the binary against real brokers are in test/integration.)

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import { describeInProcess, runInProcess } from '../../helpers/inproc.js';
import { startStubBroker, type StubBroker } from '../../helpers/stub-broker.js';

let broker: StubBroker;

const run = async (args: string[], input?: string) => {
  const r = await runInProcess(args, { env: { BROKER_ADDRESS: broker.address }, input });
  return { ...r, what: describeInProcess(args, r) };
};

describe('commands in-process', () => {
  before(async () => {
    broker = await startStubBroker([
      { name: 'acme/one', labels: { app: 'billing' }, content: 'first\n' },
      { name: 'acme/two', labels: { app: 'billing', team: 'x' }, content: 'second\n' },
    ]);
  });
  after(() => broker.stop());

  it('journals list renders the table with the requested columns in their fixed order', async () => {
    const r = await run(['journals', 'list', '-L', 'team', '-L', 'app', '-p', '-r', '--rf']);
    assert.equal(r.code, 0, r.what);
    assert.equal(r.stderr, '', r.what);
    const lines = r.stdout.trimEnd().split('\n');
    assert.deepEqual(
      lines[1]!.split('│').map((c) => c.trim()).filter(Boolean),
      ['NAME', 'RF', 'PRIMARY', 'REPLICAS', 'TEAM', 'APP'],
    );
    assert.deepEqual(lines[3]!.split('│').map((c) => c.trim()).filter(Boolean), ['acme/one', '1', 'stub', '<none>', 'billing']);
    assert.deepEqual(lines[4]!.split('│').map((c) => c.trim()).filter(Boolean), ['acme/two', '1', 'stub', 'x', 'billing']);
  });

  it('journals list -o json is the List response; -o yaml the hierarchy', async () => {
    const j = await run(['journals', 'list', '-o', 'json']);
    assert.equal(j.code, 0, j.what);
    const parsed = JSON.parse(j.stdout) as { journals: { spec: { name: string } }[] };
    assert.deepEqual(parsed.journals.map((x) => x.spec.name), ['acme/one', 'acme/two']);
    const y = await run(['journals', 'list', '-o', 'yaml']);
    assert.equal(y.code, 0, y.what);
    assert.match(y.stdout, /^name: acme\/$/m);
    assert.match(y.stdout, /name: acme\/one/);
  });

  it('journals list sends the parsed selector', async () => {
    const before = broker.requests.length;
    const r = await run(['journals', 'list', '-l', 'app=billing,team=x']);
    assert.equal(r.code, 0, r.what);
    const req = broker.requests.slice(before).find((q) => q.method === 'list')!.request as {
      selector: { include: { labels: { name: string; value: string }[] } };
    };
    assert.deepEqual(req.selector.include.labels.map((l) => `${l.name}=${l.value}`), ['app=billing', 'team=x']);
  });

  it('journals read writes every journal to the write head and exits 0', async () => {
    const r = await run(['journals', 'read', '-l', 'app=billing']);
    assert.equal(r.code, 0, r.what);
    assert.deepEqual(r.stdout.split('\n').filter(Boolean).sort(), ['first', 'second']);
  });

  it('journals read says on stderr when a journal stops below its write head, and still exits 0', async () => {
    const gap = await startStubBroker([{ name: 'acme/late', content: 'not here yet\n', notHeld: true }]);
    try {
      const args = ['journals', 'read', '-l', 'name=acme/late'];
      const r = await runInProcess(args, { env: { BROKER_ADDRESS: gap.address } });
      const what = describeInProcess(args, r);
      assert.equal(r.code, 0, what);
      assert.equal(r.stdout, '', what);
      assert.match(r.stderr, /read of acme\/late stops at offset 0, below its write head 13: the broker has no fragment there yet/, what);
    } finally {
      await gap.stop();
    }
  });

  it('journals append --framing lines appends every record once, whole', async () => {
    const r = await run(['journals', 'append', '-l', 'name=acme/one', '--framing', 'lines'], 'a\nb\n');
    assert.equal(r.code, 0, r.what);
    // The stub matches every journal whatever the selector: records spread over both, whole.
    const all = [...broker.appended.values()].map((b) => b.toString());
    for (const text of all) assert.match(text, /^([ab]\n)*$/);
    assert.deepEqual(all.join('').split('\n').filter(Boolean).sort(), ['a', 'b']);
  });

  it('journals fragments prints the header of an empty table', async () => {
    const r = await run(['journals', 'fragments', '-l', 'app=billing']);
    assert.equal(r.code, 0, r.what);
    assert.match(r.stdout, /JOURNAL.*OFFSET.*LENGTH.*PERSISTED.*SHA 1.*COMPRESSION/);
  });
});
