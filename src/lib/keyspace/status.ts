// One etcd member's own view of the cluster (etcd's Maintenance.Status RPC), for health checks: a
// member that answers but knows no raft leader can serve neither a linearizable read nor a write,
// so every broker and consumer on it stalls. The call goes to exactly the endpoint given, so each
// member of a cluster is checked, not whichever one a balancer picks.
//
// Deliberately not on the `etcd3` package (src/lib/keyspace/client.ts): that loads etcd's protobuf
// definitions from files at import time, which the CLI bundle does not carry, and a status check
// needs one unary call. The messages are small and stable (etcd's rpc.proto, api/etcdserverpb):
//   StatusRequest  {}
//   StatusResponse { ResponseHeader header = 1; string version = 2; int64 dbSize = 3;
//                    uint64 leader = 4; uint64 raftIndex = 5; uint64 raftTerm = 6;
//                    uint64 raftAppliedIndex = 7; repeated string errors = 8;
//                    int64 dbSizeInUse = 9; bool isLearner = 10; }
//   ResponseHeader { uint64 cluster_id = 1; uint64 member_id = 2; int64 revision = 3; uint64 raft_term = 4; }
// leader is 0 while the member knows no leader.
import { Client, credentials, type ServiceError } from '@grpc/grpc-js';
import { BinaryReader, WireType } from '@bufbuild/protobuf/wire';
import { parseEndpoint } from '../protocol/route.js';
import { GazctlError } from '../protocol/errors.js';
import { socksFailure, socksGrpcTarget, socksServer } from '../socks.js';
import { etcdTlsHint, type EtcdTls } from './tls.js';

/** An etcd member did not answer its status call (unreachable, no answer in time, bad reply). */
export class EtcdStatusError extends GazctlError {}

export interface EtcdMemberStatus {
  endpoint: string;
  /** The answering member's id, in hex as etcdctl prints it. */
  memberId: string;
  /** The id of the member it believes leads (hex); undefined when it knows of no leader. */
  leader: string | undefined;
  version: string;
  raftTerm: bigint;
  /** Alarms and errors the member reports (e.g. "NOSPACE"). */
  errors: string[];
  isLearner: boolean;
}

/** grpc-js details on one line, without its resolver note. */
const oneLine = (s: string) => s.replace(/\s*Resolution note:.*$/s, '').replace(/\s+/g, ' ').trim();

const STATUS_PATH = '/etcdserverpb.Maintenance/Status';

/** Decodes a StatusResponse (fields we do not use are skipped). */
export function decodeStatusResponse(buf: Uint8Array, endpoint = ''): EtcdMemberStatus {
  const r = new BinaryReader(buf);
  const out: EtcdMemberStatus = { endpoint, memberId: '0', leader: undefined, version: '', raftTerm: 0n, errors: [], isLearner: false };
  let leader = 0n;
  while (r.pos < r.len) {
    const [field, wt] = r.tag();
    if (field === 1 && wt === WireType.LengthDelimited) {
      const h = new BinaryReader(r.bytes());
      while (h.pos < h.len) {
        const [hf, hwt] = h.tag();
        if (hf === 2 && hwt === WireType.Varint) out.memberId = BigInt(h.uint64()).toString(16);
        else if (hf === 4 && hwt === WireType.Varint && out.raftTerm === 0n) out.raftTerm = BigInt(h.uint64());
        else h.skip(hwt);
      }
    } else if (field === 2 && wt === WireType.LengthDelimited) out.version = r.string();
    else if (field === 4 && wt === WireType.Varint) leader = BigInt(r.uint64());
    else if (field === 6 && wt === WireType.Varint) out.raftTerm = BigInt(r.uint64());
    else if (field === 8 && wt === WireType.LengthDelimited) out.errors.push(r.string());
    else if (field === 10 && wt === WireType.Varint) out.isLearner = r.bool();
    else r.skip(wt);
  }
  out.leader = leader === 0n ? undefined : leader.toString(16);
  return out;
}

/**
 * Asks the member at `endpoint` (http://host:port or https://) for its status within
 * `timeoutMs`. Throws EtcdStatusError when it cannot be reached or does not answer in time.
 * `tls` (CA, client certificate) applies to https:// endpoints; without its CA the server
 * certificate is checked against the system roots.
 */
export function etcdMemberStatus(endpoint: string, timeoutMs: number, signal?: AbortSignal, tls?: EtcdTls): Promise<EtcdMemberStatus> {
  let parsed: ReturnType<typeof parseEndpoint>;
  try {
    parsed = parseEndpoint(endpoint);
  } catch (e) {
    return Promise.reject(new EtcdStatusError(`etcd ${endpoint}: ${(e as Error).message}`, { cause: e }));
  }
  const creds = parsed.secure ? credentials.createSsl(tls?.ca ?? null, tls?.key ?? null, tls?.cert ?? null) : credentials.createInsecure();
  // Through the process's SOCKS proxy when one is set, as every other connection.
  const socks = parsed.unixPath === undefined ? socksServer() : undefined;
  const via = socks ? socksGrpcTarget(parsed.target, socks) : undefined;
  const client = via ? new Client(via.target, creds, via.options) : new Client(parsed.target, creds);
  return new Promise<EtcdMemberStatus>((resolve, reject) => {
    const call = client.makeUnaryRequest(
      STATUS_PATH,
      () => Buffer.alloc(0),
      (b: Buffer) => b,
      {},
      { deadline: Date.now() + timeoutMs },
      (err: ServiceError | null, res?: Buffer) => {
        signal?.removeEventListener('abort', onAbort);
        const why = err && ((via && socksFailure(parsed.target)) || oneLine(err.details || err.message) + etcdTlsHint(err.details || err.message));
        if (err) reject(new EtcdStatusError(`etcd ${endpoint}: ${why}`, { cause: err }));
        else {
          try {
            resolve(decodeStatusResponse(res ?? Buffer.alloc(0), endpoint));
          } catch (e) {
            reject(new EtcdStatusError(`etcd ${endpoint}: undecodable status response: ${(e as Error).message}`, { cause: e }));
          }
        }
      },
    );
    const onAbort = () => call.cancel();
    if (signal?.aborted) call.cancel();
    else signal?.addEventListener('abort', onAbort, { once: true });
  }).finally(() => {
    client.close();
    via?.tunnel.close();
  });
}
