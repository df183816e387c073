import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { nanosToDuration } from '../../../../src/lib/protocol/duration.js';
import {
  CompressionCodec,
  JournalSpec_Suspend_Level,
  ListResponse,
  Status,
  type Header,
} from '../../../../src/lib/protocol/gen/broker/protocol.js';
import {
  ListResponse as ShardListResponse,
  ReplicaStatus_Code,
  Status as ConsumerStatus,
} from '../../../../src/lib/protocol/gen/consumer/protocol.js';
import { label, labelSet } from '../../../../src/lib/protocol/labels.js';
import {
  fragmentToJson,
  headerToJson,
  journalListResponseToJson,
  jsonString,
  labelSelectorToJson,
  shardListResponseToJson,
} from '../../../../src/lib/protocol/protojson.js';

const S = 1_000_000_000n;

const header: Header = {
  process_id: { zone: 'local', suffix: 'broker-1' },
  route: { members: [], primary: -1, endpoints: [] },
  etcd: { cluster_id: 14841639068965178418n, member_id: 10276657743932975437n, revision: 123n, raft_term: 2n },
};

const HEADER_JSON =
  '{"process_id":{"zone":"local","suffix":"broker-1"},"route":{"members":[],"primary":-1,"endpoints":[]},' +
  '"etcd":{"cluster_id":"14841639068965178418","member_id":"10276657743932975437","revision":"123","raft_term":"2"}}';

describe('protojson', () => {
  it('prints a journal ListResponse like gazctl -o json', () => {
    const resp = ListResponse.fromPartial({
      status: Status.OK,
      header,
      journals: [
        {
          spec: {
            name: 'acme/a',
            replication: 3,
            labels: labelSet(label('app', 'web'), label('content-type', 'application/x-ndjson')),
            fragment: {
              length: 536870912n,
              compression_codec: CompressionCodec.SNAPPY,
              stores: ['s3://bucket/gazette/'],
              refresh_interval: nanosToDuration(60n * S),
              retention: nanosToDuration(1500n * 1_000_000n),
              flush_interval: undefined,
              path_postfix_template: '',
            },
            flags: 4,
            max_append_rate: 1048576n,
            suspend: { level: JournalSpec_Suspend_Level.PARTIAL, offset: 2048n },
          },
          mod_revision: 12n,
          route: {
            members: [{ zone: 'local', suffix: 'broker-1' }, { zone: 'local', suffix: 'broker-2' }],
            primary: 0,
            endpoints: ['http://127.0.0.1:8080', 'http://127.0.0.1:8081'],
          },
          create_revision: 5n,
        },
        {
          // Minimal item: always-sent messages print their zero value; suspend prints null.
          spec: { name: 'acme/b' },
          mod_revision: 14n,
        },
      ],
    });
    const expected =
      '{"status":"OK","header":' + HEADER_JSON + ',"journals":[' +
      '{"spec":{"name":"acme/a","replication":3,' +
      '"labels":{"labels":[{"name":"app","value":"web","prefix":false},{"name":"content-type","value":"application/x-ndjson","prefix":false}]},' +
      '"fragment":{"length":"536870912","compression_codec":"SNAPPY","stores":["s3://bucket/gazette/"],' +
      '"refresh_interval":"60s","retention":"1.500s","flush_interval":"0s","path_postfix_template":""},' +
      '"flags":4,"max_append_rate":"1048576","suspend":{"level":"PARTIAL","offset":"2048"}},' +
      '"mod_revision":"12",' +
      '"route":{"members":[{"zone":"local","suffix":"broker-1"},{"zone":"local","suffix":"broker-2"}],"primary":0,' +
      '"endpoints":["http://127.0.0.1:8080","http://127.0.0.1:8081"]},' +
      '"create_revision":"5"},' +
      '{"spec":{"name":"acme/b","replication":0,"labels":{"labels":[]},' +
      '"fragment":{"length":"0","compression_codec":"INVALID","stores":[],"refresh_interval":"0s","retention":"0s","flush_interval":"0s","path_postfix_template":""},' +
      '"flags":0,"max_append_rate":"0","suspend":null},' +
      '"mod_revision":"14","route":{"members":[],"primary":0,"endpoints":[]},"create_revision":"0"}' +
      ']}';
    const out = journalListResponseToJson(resp);
    assert.equal(out, expected);
    assert.doesNotThrow(() => JSON.parse(out));
    assert.ok(!out.includes('\n'));
  });

  it('survives a wire round trip unchanged', () => {
    const resp = ListResponse.fromPartial({ status: Status.OK, header, journals: [{ spec: { name: 'acme/c', replication: 1 }, mod_revision: 3n }] });
    const decoded = ListResponse.decode(ListResponse.encode(resp).finish());
    assert.equal(journalListResponseToJson(decoded), journalListResponseToJson(resp));
  });

  it('prints a shard ListResponse with statuses and extension', () => {
    const resp = ShardListResponse.fromPartial({
      status: ConsumerStatus.OK,
      header,
      shards: [
        {
          spec: {
            id: 'shard-000',
            sources: [{ journal: 'acme/a', min_offset: 0n }],
            recovery_log_prefix: 'recovery/logs',
            hint_prefix: '/gazette/hints',
            hint_backups: 2,
            max_txn_duration: nanosToDuration(S),
            min_txn_duration: undefined,
            hot_standbys: 1,
            labels: labelSet(label('app', 'count')),
          },
          mod_revision: 40n,
          route: { members: [{ zone: 'local', suffix: 'consumer-1' }], primary: 0, endpoints: ['http://c1:9000'] },
          status: [{ code: ReplicaStatus_Code.PRIMARY, errors: [] }],
          create_revision: 39n,
        },
        {
          spec: { id: 'shard-001' },
          status: [{ code: ReplicaStatus_Code.FAILED, errors: ['boom <&>'] }, { code: 250 as ReplicaStatus_Code, errors: [] }],
        },
      ],
    });
    const expected =
      '{"status":"OK","header":' + HEADER_JSON + ',"shards":[' +
      '{"spec":{"id":"shard-000","sources":[{"journal":"acme/a","min_offset":"0"}],"recovery_log_prefix":"recovery/logs",' +
      '"hint_prefix":"/gazette/hints","hint_backups":2,"max_txn_duration":"1s","min_txn_duration":"0s","disable":false,' +
      '"hot_standbys":1,"labels":{"labels":[{"name":"app","value":"count","prefix":false}]},"disable_wait_for_ack":false,' +
      '"ring_buffer_size":0,"read_channel_size":0},"mod_revision":"40",' +
      '"route":{"members":[{"zone":"local","suffix":"consumer-1"}],"primary":0,"endpoints":["http://c1:9000"]},' +
      '"status":[{"code":"PRIMARY","errors":[]}],"create_revision":"39"},' +
      '{"spec":{"id":"shard-001","sources":[],"recovery_log_prefix":"","hint_prefix":"","hint_backups":0,' +
      '"max_txn_duration":"0s","min_txn_duration":"0s","disable":false,"hot_standbys":0,"labels":{"labels":[]},' +
      '"disable_wait_for_ack":false,"ring_buffer_size":0,"read_channel_size":0},"mod_revision":"0",' +
      '"route":{"members":[],"primary":0,"endpoints":[]},' +
      '"status":[{"code":"FAILED","errors":["boom \\u003c\\u0026\\u003e"]},{"code":250,"errors":[]}],"create_revision":"0"}' +
      '],"extension":null}';
    assert.equal(shardListResponseToJson(resp), expected);
    const withExt = { ...resp, shards: [], extension: Buffer.from([1, 2, 3]) };
    assert.equal(shardListResponseToJson(withExt), '{"status":"OK","header":' + HEADER_JSON + ',"shards":[],"extension":"AQID"}');
  });

  it('prints building blocks', () => {
    assert.equal(headerToJson(header), HEADER_JSON);
    assert.equal(
      headerToJson(undefined),
      '{"process_id":{"zone":"","suffix":""},"route":{"members":[],"primary":0,"endpoints":[]},' +
        '"etcd":{"cluster_id":"0","member_id":"0","revision":"0","raft_term":"0"}}',
    );
    assert.equal(
      labelSelectorToJson({ include: labelSet(label('name', 'a/', true)), exclude: undefined }),
      '{"include":{"labels":[{"name":"name","value":"a/","prefix":true}]},"exclude":{"labels":[]}}',
    );
    assert.equal(fragmentToJson(undefined), 'null');
    assert.equal(
      fragmentToJson({
        journal: 'acme/a',
        begin: 0n,
        end: 10n,
        sum: { part1: 0x0102030405060708n, part2: 2n, part3: 0xffffffff },
        compression_codec: CompressionCodec.GZIP_OFFLOAD_DECOMPRESSION,
        backing_store: 's3://b/',
        mod_time: 1700000000n,
        path_postfix: '',
      }),
      '{"journal":"acme/a","begin":"0","end":"10","sum":{"part1":"72623859790382856","part2":"2","part3":4294967295},' +
        '"compression_codec":"GZIP_OFFLOAD_DECOMPRESSION","backing_store":"s3://b/","mod_time":"1700000000","path_postfix":""}',
    );
    assert.equal(jsonString('a<b>&\u2028"'), '"a\\u003cb\\u003e\\u0026\\u2028\\""');
    assert.equal(
      journalListResponseToJson({ status: 99 as Status, header: undefined, journals: [] }).slice(0, 12),
      '{"status":99',
    );
  });
});
