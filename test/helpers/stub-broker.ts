// A scripted broker for in-process command tests: a Journal stub (src/testing/stubs.ts) that
// lists a fixed set of journals (also as a watch), serves each journal's content to reads and
// then reports the write head, accepts appends, and answers Apply with OK.
import type { ServerWritableStream } from '@grpc/grpc-js';
import {
  AppendResponse,
  ApplyResponse,
  FragmentsResponse,
  ListResponse,
  ReadResponse,
  Status,
  type AppendRequest,
  type ListRequest,
  type ListResponse_Journal,
  type ReadRequest,
} from '../../src/lib/protocol/gen/broker/protocol.js';
import { startJournalStub, stubHeader, type StubServer } from '../../src/testing/stubs.js';

export interface StubJournal {
  name: string;
  labels?: Record<string, string>;
  content?: string;
  /** The broker holds none of the content yet (its write head is past it): reads get OFFSET_NOT_YET_AVAILABLE below the head. */
  notHeld?: boolean;
}

export interface StubBroker extends StubServer {
  /** Bytes appended per journal. */
  appended: Map<string, Buffer>;
}

function entry(j: StubJournal): ListResponse_Journal {
  return {
    spec: {
      name: j.name,
      replication: 1,
      labels: { labels: Object.entries(j.labels ?? {}).sort(([a], [b]) => (a < b ? -1 : 1)).map(([name, value]) => ({ name, value, prefix: false })) },
      fragment: undefined,
      flags: 0,
      max_append_rate: 0n,
      suspend: undefined,
    },
    mod_revision: 10n,
    route: { members: [{ zone: 'local', suffix: 'stub' }], primary: 0, endpoints: [] },
    create_revision: 1n,
  };
}

export async function startStubBroker(journals: StubJournal[]): Promise<StubBroker> {
  const appended = new Map<string, Buffer>();
  const stub = await startJournalStub({
    list: (call: ServerWritableStream<ListRequest, ListResponse>) => {
      call.write(ListResponse.fromPartial({ status: Status.OK, header: stubHeader({ revision: 100n }), journals: journals.map(entry) }));
      if (call.request.watch) call.write(ListResponse.fromPartial({ header: {}, journals: [] }));
      else call.end();
    },
    read: (call: ServerWritableStream<ReadRequest, ReadResponse>) => {
      // Brokers read a journal named with a `;suffix` as the journal itself.
      const j = journals.find((x) => x.name === call.request.journal.split(';')[0]);
      const content = Buffer.from(j?.content ?? '');
      const head = BigInt(content.length);
      if (!j) {
        call.write(ReadResponse.fromPartial({ status: Status.JOURNAL_NOT_FOUND, header: stubHeader() }));
        call.end();
        return;
      }
      const from = call.request.offset < 0n ? head : call.request.offset;
      if (j.notHeld && from < head) {
        call.write(ReadResponse.fromPartial({ status: Status.OFFSET_NOT_YET_AVAILABLE, header: stubHeader(), offset: from, write_head: head }));
        call.end();
        return;
      }
      if (from < head) {
        call.write(ReadResponse.fromPartial({ status: Status.OK, header: stubHeader(), offset: from, write_head: head, fragment: { journal: j.name, begin: 0n, end: head, sum: {} } }));
        call.write(ReadResponse.fromPartial({ offset: from, content: content.subarray(Number(from)) }));
      }
      call.write(ReadResponse.fromPartial({ status: Status.OFFSET_NOT_YET_AVAILABLE, header: stubHeader(), offset: head, write_head: head }));
      call.end();
    },
    append: (call, cb) => {
      let journal = '';
      const chunks: Buffer[] = [];
      call.on('data', (req: AppendRequest) => {
        if (req.journal) journal = req.journal;
        else if (req.content.length) chunks.push(Buffer.from(req.content));
      });
      call.on('end', () => {
        const prev = appended.get(journal) ?? Buffer.alloc(0);
        const data = Buffer.concat(chunks);
        appended.set(journal, Buffer.concat([prev, data]));
        cb(null, AppendResponse.fromPartial({
          status: Status.OK,
          header: stubHeader(),
          commit: { journal, begin: BigInt(prev.length), end: BigInt(prev.length + data.length), sum: {} },
          registers: { labels: [] },
        }));
      });
    },
    apply: (_call, cb) => cb(null, ApplyResponse.fromPartial({ status: Status.OK, header: stubHeader({ revision: 101n }) })),
    listFragments: (_call, cb) => cb(null, FragmentsResponse.fromPartial({ status: Status.OK, header: stubHeader(), fragments: [] })),
  });
  return { ...stub, appended };
}
