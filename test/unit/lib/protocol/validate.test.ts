import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { nanosToDuration } from '../../../../src/lib/protocol/duration.js';
import { ValidationError } from '../../../../src/lib/protocol/errors.js';
import {
  ApplyRequest,
  CompressionCodec,
  JournalSpec,
  JournalSpec_Suspend_Level,
  type Header,
} from '../../../../src/lib/protocol/gen/broker/protocol.js';
import { ApplyRequest as ShardApplyRequest, ShardSpec } from '../../../../src/lib/protocol/gen/consumer/protocol.js';
import { label, labelSet } from '../../../../src/lib/protocol/labels.js';
import {
  checkGoTemplate,
  cleanPath,
  validateEndpoint,
  validateFragmentStoreURL,
  validateGoTemplate,
  validateHeader,
  validateJournalApplyRequest,
  validateJournalName,
  validateJournalNameWithMeta,
  validateJournalSpec,
  validatePathPostfix,
  validateProcessID,
  validateRoute,
  validateShardApplyRequest,
  validateShardID,
  validateShardSpec,
} from '../../../../src/lib/protocol/validate/index.js';

const S = 1_000_000_000n;

function goodJournal(name = 'acme/events/part-000'): JournalSpec {
  return JournalSpec.fromPartial({
    name,
    replication: 3,
    labels: labelSet(label('content-type', 'application/x-ndjson'), label('app', 'events')),
    fragment: {
      length: 1n << 29n,
      compression_codec: CompressionCodec.SNAPPY,
      stores: ['s3://bucket/gazette/?profile=prod', 'file:///mnt/fragments/'],
      refresh_interval: nanosToDuration(60n * S),
      retention: nanosToDuration(720n * 3600n * S),
      flush_interval: nanosToDuration(0n),
      path_postfix_template: 'date={{ .Spool.FirstAppendTime.Format "2006-01-02" }}',
    },
    flags: 4,
    max_append_rate: 0n,
  });
}

function goodShard(id = 'shard-000'): ShardSpec {
  return ShardSpec.fromPartial({
    id,
    sources: [{ journal: 'acme/a', min_offset: 0n }, { journal: 'acme/b', min_offset: 1024n }],
    recovery_log_prefix: 'recovery/logs',
    hint_prefix: '/gazette/hints',
    hint_backups: 2,
    max_txn_duration: nanosToDuration(S),
    min_txn_duration: nanosToDuration(0n),
    labels: labelSet(label('app', 'word-count')),
  });
}

/** Asserts fn throws a one-line ValidationError whose message is exactly `msg` (or matches it). */
function rejects(fn: () => void, msg: string | RegExp): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof ValidationError, `expected ValidationError, got ${String(e)}`);
    if (typeof msg === 'string') assert.equal(e.message, msg);
    else assert.match(e.message, msg);
    assert.ok(!e.message.includes('\n'));
    return true;
  });
}

describe('names', () => {
  it('accepts valid journal names', () => {
    for (const n of ['abcd', 'acme/events/part-000', 'a/b=c%20/d.e', 'ünï/κώδικας', 'x'.repeat(512)]) validateJournalName(n);
  });
  it('rejects invalid journal names', () => {
    rejects(() => validateJournalName('a//b'), 'journal "a//b": name must be a clean path (like "a/b")');
    rejects(() => validateJournalName('abc'), 'journal "abc": name length 3 is out of range (4 to 512 bytes)');
    rejects(() => validateJournalName('x'.repeat(513)), /name length 513 is out of range \(4 to 512 bytes\)/);
    rejects(() => validateJournalName('acme/'), /must be a clean path \(like "acme"\)/);
    rejects(() => validateJournalName('/acme/a'), 'journal "/acme/a": name must not begin with "/"');
    rejects(() => validateJournalName('acme/./a'), /clean path/);
    rejects(() => validateJournalName('acme/b/../a'), /clean path/);
    rejects(() => validateJournalName('acme a'), /invalid character " "/);
    rejects(() => validateJournalName('acme#a'), /invalid character "#"/);
    rejects(() => validateJournalName('acme/a;meta'), /may not carry a ";" suffix/);
  });
  it('allows a ;meta suffix only where reads allow it', () => {
    validateJournalNameWithMeta('acme/a;meta');
    validateJournalNameWithMeta('acme/a');
    rejects(() => validateJournalNameWithMeta('acme/a;'), /";" suffix "": length 0 is out of range \(1 to 512 bytes\)/);
  });
  it('validates shard IDs', () => {
    validateShardID('shard-000');
    validateShardID('a/b.c_d+e');
    rejects(() => validateShardID('abc'), 'shard "abc": id length 3 is out of range (4 to 512 bytes)');
    rejects(() => validateShardID('shard=1'), /shard "shard=1": id invalid character "="/);
  });
  it('validates path postfixes', () => {
    validatePathPostfix('');
    validatePathPostfix('date=2019-11-19');
    validatePathPostfix('a/b=c');
    rejects(() => validatePathPostfix('/abs'), /must not begin with "\/"/);
    rejects(() => validatePathPostfix('a/'), /clean path/);
    rejects(() => validatePathPostfix('x'.repeat(513)), /length 513/);
  });
  it('validates process IDs', () => {
    validateProcessID({ zone: 'z', suffix: 'broker-1' });
    rejects(() => validateProcessID({ zone: '', suffix: 'broker-1' }), /zone "": length 0 is out of range \(1 to 32 bytes\)/);
    rejects(() => validateProcessID({ zone: 'z'.repeat(33), suffix: 'broker-1' }), /length 33/);
    rejects(() => validateProcessID({ zone: 'us', suffix: 'b1' }), /suffix "b1": length 2 is out of range \(4 to 128 bytes\)/);
    rejects(() => validateProcessID({ zone: 'us', suffix: 'broker=1' }), /invalid character "="/);
  });
  it('validates endpoints', () => {
    validateEndpoint('http://localhost:8080');
    validateEndpoint('https://broker.example.com');
    validateEndpoint('unix://localhost/tmp/gazette.sock');
    rejects(() => validateEndpoint('localhost:8080'), /endpoint "localhost:8080": URL must have a host|absolute/);
    rejects(() => validateEndpoint('/tmp/sock'), 'endpoint "/tmp/sock": must be an absolute URL (like http://host:port)');
    rejects(() => validateEndpoint('http:///path'), /must have a host/);
  });
  it('cleans paths like Go', () => {
    assert.equal(cleanPath('a//b/./c/..'), 'a/b');
    assert.equal(cleanPath(''), '.');
    assert.equal(cleanPath('/../a'), '/a');
    assert.equal(cleanPath('../a/'), '../a');
  });
});

describe('fragment store URLs', () => {
  const good = [
    's3://bucket/',
    's3://bucket/prefix/path/',
    's3://bucket/p/?profile=x&endpoint=http://minio:9000&region=us-east-1&ACL=private&storageClass=STANDARD&SSE=aws:kms&SSEKMSKeyId=k',
    'gs://bucket/prefix/',
    'gs://bucket/p/?find=a&REPLACE=b',
    'azure://container/prefix/',
    'azure-ad://tenant/account/container/prefix/',
    'file:///mnt/fragments/',
    'file:///',
  ];
  for (const u of good) it(`accepts ${u}`, () => validateFragmentStoreURL(u));

  const bad: [string, string | RegExp][] = [
    ['s3://bucket', 'store "s3://bucket": path "" must end in "/"'],
    ['s3://bucket/prefix', 'store "s3://bucket/prefix": path "/prefix" must end in "/"'],
    ['s3:///prefix/', /s3:\/\/ store needs a bucket/],
    ['gs:bucket/prefix/', /gs:\/\/ store needs a bucket/],
    ['http://bucket/prefix/', /scheme "http" is not supported/],
    ['bucket/prefix/', /is not an absolute URL/],
    ['file://host/mnt/', /file:\/\/ store must not have a host \("host"\)/],
    ['gs://bucket/p/?profile=x', /unknown query argument "profile" \(allowed: find, replace\)/],
    ['s3://bucket/p/?bogus=1', /unknown query argument "bogus"/],
    ['azure-ad://tenant/account/', /azure-ad:\/\/ store needs <tenant>\/<account>\/<container>\//],
    ['', /must not be empty/],
  ];
  for (const [u, msg] of bad) it(`rejects ${JSON.stringify(u)}`, () => rejects(() => validateFragmentStoreURL(u), msg));
});

describe('Go templates', () => {
  const good = [
    '',
    'plain/text',
    'date={{ .Spool.FirstAppendTime.Format "2006-01-02" }}',
    '{{ .Name }}/{{ .Replication }}',
    '{{- .Spool.Journal -}}',
    '{{/* a comment */}}x',
    '{{ if .Spool.Begin }}a{{ else if .Name }}b{{ else }}c{{ end }}',
    '{{ with .Spool }}{{ .Begin }}{{ else }}{{ .Name }}{{ end }}',
    '{{ range $i, $l := .LabelSet.Labels }}{{ $i }}{{ $l.Name }}{{ end }}',
    '{{ $x := .Name }}{{ $x }}{{ $x = "y" }}',
    '{{ printf "%s-%d" .Name .Replication | len }}',
    '{{ (index .LabelSet.Labels 0).Name }}',
    '{{ define "t" }}{{ .Anything }}{{ end }}{{ template "t" . }}',
    '{{ eq .Flags 4 }} {{ 1.5 }} {{ -3 }} {{ 0x1F }} {{ \'a\' }} {{ `raw` }} {{ true }}',
    '{{ $.Spool.End }}',
  ];
  for (const t of good) {
    it(`accepts ${JSON.stringify(t)}`, () => assert.equal(checkGoTemplate(t), undefined));
  }
  const bad: [string, RegExp][] = [
    ['{{ .Foo ', /unclosed action at line 1, column 1/],
    ['{{ .Name }', /unexpected "}" in action/],
    ['{{ if .Name }}x', /missing \{\{end\}\} for \{\{if\}\}/],
    ['x{{ end }}', /unexpected \{\{end\}\} at line 1, column 2/],
    ['{{ else }}', /unexpected \{\{else\}\}/],
    ['{{ if .Name }}a{{ else }}b{{ else }}c{{ end }}', /expected \{\{end\}\}; found \{\{else\}\}/],
    ['{{ }}', /missing value for command/],
    ['{{ if }}x{{ end }}', /missing value for if/],
    ['{{ nope .Name }}', /function "nope" not defined/],
    ['{{ $undefined }}', /undefined variable "\$undefined"/],
    ['{{ .Name | "x" }}', /non executable command in pipeline stage 2/],
    ['{{ .Name | }}', /missing command after "\|"/],
    ['{{ (.Name }}', /unclosed left paren/],
    ['{{ .Name) }}', /unexpected right paren/],
    ['{{ "abc }}', /unterminated quoted string/],
    ['{{ .Foo }}', /can't evaluate field Foo/],
    ['{{ .Spool.Bogus }}', /can't evaluate field Bogus of .Spool/],
    ['{{ template "missing" }}', /no such template "missing"/],
    ['{{ break }}', /outside \{\{range\}\}/],
    ['{{ nil }}', /nil is not a command/],
    ['{{ .Name @ }}', /unexpected "@" in action/],
    ['{{/* unclosed comment }}', /unclosed comment/],
    ['{{ 3x }}', /bad number syntax/],
    ['a\n{{ .Name', /line 2, column 1/],
  ];
  for (const [t, re] of bad) {
    it(`rejects ${JSON.stringify(t)}`, () => assert.match(checkGoTemplate(t) ?? '(accepted)', re));
  }
  it('validateGoTemplate throws a ValidationError naming the template', () => {
    rejects(() => validateGoTemplate('{{ .Foo '), 'template "{{ .Foo ": unclosed action at line 1, column 1');
  });
});

describe('validateJournalSpec', () => {
  it('accepts a good spec', () => validateJournalSpec(goodJournal()));

  const cases: [string, (s: JournalSpec) => void, string | RegExp][] = [
    ['bad name', (s) => (s.name = 'a//b'), 'journal "a//b": name must be a clean path (like "a/b")'],
    ['replication 0', (s) => (s.replication = 0), 'journal "acme/events/part-000": replication: 0 is out of range (1 to 5)'],
    ['replication 9', (s) => (s.replication = 9), /replication: 9 is out of range \(1 to 5\)/],
    ['unsorted labels', (s) => (s.labels = { labels: [label('bb'), label('aa')] }), /labels\[1\]: labels are not sorted/],
    ['reserved name label', (s) => (s.labels = labelSet(label('name', 'x'))), /labels: label "name" is reserved/],
    ['reserved prefix label', (s) => (s.labels = labelSet(label('prefix', 'x/'))), /label "prefix" is reserved/],
    ['two content types', (s) => (s.labels = labelSet(label('content-type', 'a/b'), label('content-type', 'c/d'))), /may have only one value/],
    ['message-type alone', (s) => (s.labels = labelSet(label('app.gazette.dev/message-type', 'M'))), /requires a "content-type" label/],
    ['short fragment', (s) => (s.fragment!.length = 1023n), 'journal "acme/events/part-000": fragment.length: 1023 is out of range (1024 to 17179869184)'],
    ['long fragment', (s) => (s.fragment!.length = (1n << 34n) + 1n), /fragment.length: 17179869185 is out of range/],
    ['invalid codec', (s) => (s.fragment!.compression_codec = CompressionCodec.INVALID), /fragment.compression_codec: INVALID is not a valid codec/],
    ['unknown codec', (s) => (s.fragment!.compression_codec = 9 as CompressionCodec), /fragment.compression_codec: 9 is not a valid codec/],
    ['bad store', (s) => (s.fragment!.stores = ['s3://bucket']), /fragment.stores\[0\] "s3:\/\/bucket": path "" must end in "\/"/],
    [
      'gzod on file store',
      (s) => {
        s.fragment!.compression_codec = CompressionCodec.GZIP_OFFLOAD_DECOMPRESSION;
        s.fragment!.stores = ['file:///x/'];
      },
      /GZIP_OFFLOAD_DECOMPRESSION cannot be used with a file:\/\/ store/,
    ],
    ['refresh 0', (s) => (s.fragment!.refresh_interval = nanosToDuration(0n)), /fragment.refresh_interval: 0s is out of range \(1s to 24h0m0s\)/],
    ['refresh 25h', (s) => (s.fragment!.refresh_interval = nanosToDuration(25n * 3600n * S)), /refresh_interval: 25h0m0s is out of range/],
    ['flush 30s', (s) => (s.fragment!.flush_interval = nanosToDuration(30n * S)), /fragment.flush_interval: 30s must be 0s or at least 1m0s/],
    ['bad template', (s) => (s.fragment!.path_postfix_template = '{{ .Foo '), /fragment.path_postfix_template "\{\{ .Foo ": unclosed action/],
    ['flags 3', (s) => (s.flags = 3), /flags: 3 is not valid/],
    ['negative rate', (s) => (s.max_append_rate = -1n), /max_append_rate: -1 must be >= 0/],
    ['bad suspend level', (s) => (s.suspend = { level: 7 as JournalSpec_Suspend_Level, offset: 0n }), /suspend.level: 7 is not valid/],
    ['negative suspend offset', (s) => (s.suspend = { level: JournalSpec_Suspend_Level.FULL, offset: -5n }), /suspend.offset: -5 must be >= 0/],
  ];
  for (const [what, mutate, msg] of cases) {
    it(`rejects ${what}`, () => {
      const s = goodJournal();
      mutate(s);
      rejects(() => validateJournalSpec(s), msg);
    });
  }
  it('accepts boundary values', () => {
    const s = goodJournal();
    s.replication = 5;
    s.fragment!.length = 1n << 34n;
    s.fragment!.refresh_interval = nanosToDuration(24n * 3600n * S);
    s.fragment!.flush_interval = nanosToDuration(60n * S);
    s.fragment!.retention = nanosToDuration(-1n);
    s.suspend = { level: JournalSpec_Suspend_Level.PARTIAL, offset: 100n };
    validateJournalSpec(s);
  });
});

describe('validateJournalSpec label re-checks', () => {
  it('checks labels changed in place after they passed, and labels differing only in prefix', () => {
    // Labels equal to the last valid ones are not checked again: the comparison must be by
    // content, against a copy, so that neither a changed array nor a prefix flag slips through.
    const s = goodJournal();
    s.labels = labelSet(label('app', 'x'));
    validateJournalSpec(s);
    validateJournalSpec(s);
    s.labels.labels[0]!.value = 'bad value';
    rejects(() => validateJournalSpec(s), /labels\[0\]: label "app" value "bad value"/);
    const p = goodJournal();
    p.labels = labelSet(label('app', 'x'));
    validateJournalSpec(p);
    p.labels.labels[0]!.prefix = true;
    rejects(() => validateJournalSpec(p), /has prefix=true, which is only allowed in selectors/);
  });
  it('leaves the name out only when asked to', () => {
    const s = goodJournal('a//b');
    rejects(() => validateJournalSpec(s), /name must be a clean path/);
    validateJournalSpec(s, false);
    const req = ApplyRequest.fromPartial({ changes: [{ upsert: s }, { delete: 'x//y', expect_mod_revision: 3n }] });
    rejects(() => validateJournalApplyRequest(req), /changes\[0\]: journal "a\/\/b": name must be a clean path/);
    validateJournalApplyRequest(req, { namesValidated: true });
  });
});

describe('validateShardSpec', () => {
  it('accepts a good spec', () => validateShardSpec(goodShard()));
  it('accepts a spec without a recovery log', () => {
    const s = goodShard();
    s.recovery_log_prefix = '';
    s.hint_prefix = '';
    validateShardSpec(s);
  });
  const cases: [string, (s: ShardSpec) => void, string | RegExp][] = [
    ['bad id', (s) => (s.id = 'x'), 'shard "x": id length 1 is out of range (4 to 512 bytes)'],
    ['bad source journal', (s) => (s.sources[0]!.journal = 'a//b'), 'shard "shard-000": sources[0]: journal "a//b": name must be a clean path (like "a/b")'],
    ['negative min_offset', (s) => (s.sources[1]!.min_offset = -1n), /sources\[1\].min_offset: -1 must be >= 0/],
    ['unsorted sources', (s) => s.sources.reverse(), /sources\[1\]: journal "acme\/a" must sort after "acme\/b"/],
    ['duplicate sources', (s) => (s.sources[1]!.journal = 'acme/a'), /sources\[1\]: journal "acme\/a" must sort after "acme\/a"/],
    ['bad recovery log', (s) => (s.recovery_log_prefix = 'recovery//logs'), /recovery_log_prefix "recovery\/\/logs": recovery log "recovery\/\/logs\/shard-000" must be a clean path/],
    ['relative hint prefix', (s) => (s.hint_prefix = 'gazette/hints'), /hint_prefix "gazette\/hints": must be an absolute path/],
    ['unclean hint prefix', (s) => (s.hint_prefix = '/gazette//hints'), /hint_prefix "\/gazette\/\/hints": must be a clean path/],
    ['empty hint prefix', (s) => (s.hint_prefix = ''), /hint_prefix "": length 0/],
    [
      'hint prefix without log',
      (s) => (s.recovery_log_prefix = ''),
      /hint_prefix "\/gazette\/hints": must be empty when recovery_log_prefix is empty/,
    ],
    ['negative hint backups', (s) => (s.hint_backups = -1), /hint_backups: -1 must be >= 0/],
    ['zero max txn', (s) => (s.max_txn_duration = nanosToDuration(0n)), /max_txn_duration: 0s must be > 0/],
    ['missing max txn', (s) => (s.max_txn_duration = undefined), /max_txn_duration: 0s must be > 0/],
    ['negative min txn', (s) => (s.min_txn_duration = nanosToDuration(-S)), /min_txn_duration: -1s must be >= 0/],
    ['id label', (s) => (s.labels = labelSet(label('id', 'x'))), /labels: label "id" is reserved/],
    ['two regions', (s) => (s.labels = labelSet(label('app.gazette.dev/region', 'a'), label('app.gazette.dev/region', 'b'))), /may have only one value/],
  ];
  for (const [what, mutate, msg] of cases) {
    it(`rejects ${what}`, () => {
      const s = goodShard();
      mutate(s);
      rejects(() => validateShardSpec(s), msg);
    });
  }
});

describe('apply requests', () => {
  it('accepts upserts and deletes with valid revisions', () => {
    validateJournalApplyRequest(
      ApplyRequest.fromPartial({
        changes: [
          { upsert: goodJournal('acme/a'), expect_mod_revision: 0n },
          { upsert: goodJournal('acme/b'), expect_mod_revision: 12n },
          { upsert: goodJournal('acme/c'), expect_mod_revision: -1n },
          { delete: 'acme/d', expect_mod_revision: 7n },
          { delete: 'acme/e', expect_mod_revision: -1n },
        ],
      }),
    );
  });
  it('rejects malformed journal changes naming the change and journal', () => {
    rejects(
      () => validateJournalApplyRequest(ApplyRequest.fromPartial({ changes: [{ expect_mod_revision: 0n }] })),
      'changes[0]: sets neither upsert nor delete; expected exactly one',
    );
    rejects(
      () => validateJournalApplyRequest(ApplyRequest.fromPartial({ changes: [{ upsert: goodJournal('acme/a'), delete: 'acme/a' }] })),
      /changes\[0\]: sets both upsert \(journal "acme\/a"\) and delete \(journal "acme\/a"\)/,
    );
    rejects(
      () => validateJournalApplyRequest(ApplyRequest.fromPartial({ changes: [{ upsert: goodJournal('acme/a') }, { delete: 'acme/b', expect_mod_revision: 0n }] })),
      'changes[1]: delete journal "acme/b": expect_mod_revision 0 is invalid for a delete (expected > 0, or -1 to skip the check)',
    );
    rejects(
      () => validateJournalApplyRequest(ApplyRequest.fromPartial({ changes: [{ upsert: goodJournal('acme/a'), expect_mod_revision: -2n }] })),
      /changes\[0\]: journal "acme\/a": expect_mod_revision -2 is invalid/,
    );
    const bad = goodJournal('acme/a');
    bad.replication = 9;
    rejects(
      () => validateJournalApplyRequest(ApplyRequest.fromPartial({ changes: [{ upsert: goodJournal('acme/0') }, { upsert: bad }] })),
      'changes[1]: journal "acme/a": replication: 9 is out of range (1 to 5)',
    );
    rejects(
      () => validateJournalApplyRequest(ApplyRequest.fromPartial({ changes: [{ delete: 'a//b', expect_mod_revision: 3n }] })),
      'changes[0]: journal "a//b": name must be a clean path (like "a/b")',
    );
  });
  it('validates shard changes, including primary hints', () => {
    validateShardApplyRequest(
      ShardApplyRequest.fromPartial({
        changes: [
          { upsert: goodShard('shard-000'), primary_hints: { log: 'recovery/logs/shard-000' } },
          { delete: 'shard-001', expect_mod_revision: 5n },
        ],
      }),
    );
    rejects(
      () => validateShardApplyRequest(ShardApplyRequest.fromPartial({ changes: [{ upsert: goodShard(), primary_hints: { log: 'other/log' } }] })),
      /changes\[0\]: shard "shard-000": primary_hints log "other\/log" does not match the shard's recovery log "recovery\/logs\/shard-000"/,
    );
    rejects(
      () => validateShardApplyRequest(ShardApplyRequest.fromPartial({ changes: [{ delete: 'shard-001', expect_mod_revision: 1n, primary_hints: { log: 'x' } }] })),
      /primary_hints are only allowed with an upsert/,
    );
    rejects(
      () => validateShardApplyRequest(ShardApplyRequest.fromPartial({ changes: [{ delete: 'shard-001' }] })),
      /changes\[0\]: delete shard "shard-001": expect_mod_revision 0 is invalid for a delete/,
    );
    rejects(() => validateShardApplyRequest(ShardApplyRequest.fromPartial({ changes: [{}] })), 'changes[0]: sets neither upsert nor delete; expected exactly one');
  });
});

describe('routes and headers', () => {
  const members = [
    { zone: 'a', suffix: 'broker-1' },
    { zone: 'a', suffix: 'broker-2' },
    { zone: 'b', suffix: 'broker-0' },
  ];
  it('accepts valid routes', () => {
    validateRoute({ members: [], primary: -1, endpoints: [] });
    validateRoute({ members, primary: 2, endpoints: ['http://a:1', '', 'https://b'] });
    validateRoute({ members, primary: -1, endpoints: [] });
  });
  it('rejects invalid routes', () => {
    rejects(() => validateRoute({ members: [], primary: 0, endpoints: [] }), 'route primary: 0 is out of range (-1 to -1)');
    rejects(() => validateRoute({ members, primary: 3, endpoints: [] }), /route primary: 3 is out of range \(-1 to 2\)/);
    rejects(() => validateRoute({ members: [members[1]!, members[0]!], primary: 0, endpoints: [] }), /route members\[1\]: members must be unique and sorted/);
    rejects(() => validateRoute({ members: [members[0]!, members[0]!], primary: 0, endpoints: [] }), /members must be unique and sorted/);
    rejects(() => validateRoute({ members, primary: 0, endpoints: ['http://a:1'] }), 'route endpoints: has 1 entries but there are 3 members');
    rejects(() => validateRoute({ members, primary: 0, endpoints: ['http://a:1', 'nohost', ''] }), /route endpoints\[1\]: endpoint "nohost"/);
    rejects(() => validateRoute({ members: [{ zone: 'a', suffix: 'b' }], primary: 0, endpoints: [] }), /route members\[0\]: process ID "a\/b": suffix "b": length 1/);
  });
  const header = (): Header => ({
    process_id: { zone: 'a', suffix: 'broker-1' },
    route: { members: [], primary: -1, endpoints: [] },
    etcd: { cluster_id: 0xdeadbeefcafebaben, member_id: 1n, revision: 42n, raft_term: 2n },
  });
  it('accepts a valid header (and an empty process ID)', () => {
    validateHeader(header());
    validateHeader({ ...header(), process_id: { zone: '', suffix: '' } });
  });
  it('rejects invalid headers', () => {
    rejects(() => validateHeader({ ...header(), etcd: { ...header().etcd!, cluster_id: 0n } }), 'header etcd: cluster_id must be non-zero');
    rejects(() => validateHeader({ ...header(), etcd: { ...header().etcd!, member_id: 0n } }), /member_id must be non-zero/);
    rejects(() => validateHeader({ ...header(), etcd: { ...header().etcd!, revision: 0n } }), /revision 0 must be > 0/);
    rejects(() => validateHeader({ ...header(), etcd: { ...header().etcd!, raft_term: 0n } }), /raft_term must be non-zero/);
    rejects(() => validateHeader({ ...header(), etcd: undefined }), /cluster_id must be non-zero/);
    rejects(() => validateHeader({ ...header(), route: { members: [], primary: 0, endpoints: [] } }), /header: route primary: 0 is out of range/);
    rejects(() => validateHeader({ ...header(), process_id: { zone: 'a', suffix: 'b' } }), /header process_id: process ID "a\/b"/);
  });
});
