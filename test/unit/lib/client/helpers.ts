// Shared helpers for the client unit tests.
import type { ServerWritableStream } from '@grpc/grpc-js';
import {
  AppendResponse,
  CompressionCodec,
  Fragment,
  FragmentsResponse,
  ListResponse,
  ReadResponse,
  Status,
  type ReadRequest,
  type ListResponse_Journal,
  type Route,
} from '../../../../src/lib/protocol/gen/broker/protocol.js';
import { stubHeader } from '../../../../src/testing/stubs.js';

/** A tiny backoff so retry tests run fast. */
export const fastDelay = (): number => 2;

export function contentResponse(offset: bigint, content: Uint8Array | string): ReadResponse {
  return ReadResponse.fromPartial({
    offset,
    content: typeof content === 'string' ? Buffer.from(content) : Buffer.from(content),
  });
}

export function fragment(journal: string, begin: bigint, end: bigint, codec = CompressionCodec.NONE, backingStore = ''): Fragment {
  return Fragment.fromPartial({ journal, begin, end, compression_codec: codec, backing_store: backingStore, sum: {} });
}

export function metaResponse(
  offset: bigint,
  frag: Fragment,
  writeHead: bigint,
  opts: { url?: string; route?: Route; first?: boolean } = {},
): ReadResponse {
  return ReadResponse.fromPartial({
    status: Status.OK,
    header: opts.first ? stubHeader({ route: opts.route }) : undefined,
    offset,
    write_head: writeHead,
    fragment: frag,
    fragment_url: opts.url ?? '',
  });
}

export function statusResponse(status: Status, extra: Partial<ReadResponse> = {}): ReadResponse {
  return ReadResponse.fromPartial({ status, header: stubHeader(), ...extra });
}

export function journalEntry(name: string, modRevision = 10n, route?: Route): ListResponse_Journal {
  return {
    spec: {
      name,
      replication: 1,
      labels: { labels: [] },
      fragment: undefined,
      flags: 0,
      max_append_rate: 0n,
      suspend: undefined,
    },
    mod_revision: modRevision,
    route: route ?? { members: [{ zone: 'a', suffix: 'b1' }], primary: 0, endpoints: ['http://127.0.0.1:1'] },
    create_revision: 1n,
  };
}

export function listFirst(journals: ListResponse_Journal[], revision = 100n, status = Status.OK): ListResponse {
  return ListResponse.fromPartial({ status, header: stubHeader({ revision }), journals });
}

export function listCont(journals: ListResponse_Journal[]): ListResponse {
  // Like Go: an always-sent, zero-valued header.
  return ListResponse.fromPartial({ header: {}, journals });
}

export function appendOk(journal: string, begin: bigint, end: bigint, route?: Route): AppendResponse {
  return AppendResponse.fromPartial({
    status: Status.OK,
    header: stubHeader({ route }),
    commit: fragment(journal, begin, end),
    registers: { labels: [] },
  });
}

export function bytes(n: number, seed = 0): Buffer {
  const b = Buffer.allocUnsafe(n);
  for (let i = 0; i < n; i++) b[i] = (i * 31 + seed) & 0xff;
  return b;
}

/**
 * A broker of a journal made of `frags` (persisted in `root` under `file:///`): a do_not_proxy read
 * gets the fragment at its offset and its URL; a proxied read gets the fragment's bytes streamed.
 */
export function fragmentBroker(data: Buffer, frags: Fragment[], urls: string[]) {
  const head = BigInt(data.length);
  return {
    read: (call: ServerWritableStream<ReadRequest, ReadResponse>) => {
      const req = call.request;
      const i = frags.findIndex((f) => f.begin <= req.offset && req.offset < f.end);
      if (i < 0) {
        call.write(statusResponse(Status.OFFSET_NOT_YET_AVAILABLE, { offset: head, write_head: head }));
        call.end();
        return;
      }
      const f = frags[i]!;
      call.write(metaResponse(req.offset, f, head, { first: true, url: urls[i] }));
      if (!req.do_not_proxy) call.write(contentResponse(req.offset, data.subarray(Number(req.offset), Number(f.end))));
      call.end();
    },
    listFragments: (_call: unknown, cb: (e: null, r: FragmentsResponse) => void) =>
      cb(
        null,
        FragmentsResponse.fromPartial({
          status: Status.OK,
          header: stubHeader(),
          fragments: frags.map((f, i) => ({ spec: { ...f, mod_time: 1_700_000_000n }, signed_url: urls[i] })),
        }),
      ),
  };
}
