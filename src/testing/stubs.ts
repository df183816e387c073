// Loopback stub servers of the Journal and Shard services, for unit tests of clients. Tests
// script the handlers; the stub records every request message (in arrival order) and the
// authorization metadata of every call.
import {
  Server,
  ServerCredentials,
  status as GrpcStatus,
  type handleClientStreamingCall,
  type handleServerStreamingCall,
  type handleUnaryCall,
  type ServiceDefinition,
  type UntypedHandleCall,
} from '@grpc/grpc-js';
import {
  JournalService,
  type AppendRequest,
  type AppendResponse,
  type ApplyRequest,
  type ApplyResponse,
  type FragmentStoreHealthRequest,
  type FragmentStoreHealthResponse,
  type FragmentsRequest,
  type FragmentsResponse,
  type Header,
  type ListRequest,
  type ListResponse,
  type ReadRequest,
  type ReadResponse,
  type Route,
} from '../lib/protocol/gen/broker/protocol.js';
import {
  ShardService,
  type ApplyRequest as ShardApplyRequest,
  type ApplyResponse as ShardApplyResponse,
  type GetHintsRequest,
  type GetHintsResponse,
  type ListRequest as ShardListRequest,
  type ListResponse as ShardListResponse,
  type StatRequest,
  type StatResponse,
  type UnassignRequest,
  type UnassignResponse,
} from '../lib/protocol/gen/consumer/protocol.js';

export interface JournalHandlers {
  list: handleServerStreamingCall<ListRequest, ListResponse>;
  apply: handleUnaryCall<ApplyRequest, ApplyResponse>;
  read: handleServerStreamingCall<ReadRequest, ReadResponse>;
  append: handleClientStreamingCall<AppendRequest, AppendResponse>;
  listFragments: handleUnaryCall<FragmentsRequest, FragmentsResponse>;
  fragmentStoreHealth: handleUnaryCall<FragmentStoreHealthRequest, FragmentStoreHealthResponse>;
}

export interface ShardHandlers {
  list: handleUnaryCall<ShardListRequest, ShardListResponse>;
  stat: handleUnaryCall<StatRequest, StatResponse>;
  apply: handleUnaryCall<ShardApplyRequest, ShardApplyResponse>;
  getHints: handleUnaryCall<GetHintsRequest, GetHintsResponse>;
  unassign: handleUnaryCall<UnassignRequest, UnassignResponse>;
}

export interface RecordedRequest {
  /** Handler name, e.g. `read`, `append`. */
  method: string;
  /** One decoded request message (streams record each message). */
  request: unknown;
}

export interface RecordedCall {
  method: string;
  /** The call's `authorization` metadata, if any. */
  authorization?: string;
}

export interface StubServer {
  /** `http://127.0.0.1:<port>` */
  address: string;
  port: number;
  requests: RecordedRequest[];
  calls: RecordedCall[];
  /** Stops the server at once, cancelling calls in flight. */
  stop(): Promise<void>;
}

export interface StubOptions {
  /** Bind this port instead of an ephemeral one (e.g. to restart a stub in place). */
  port?: number;
}

type AnyDef = ServiceDefinition[string];

async function startStub(
  service: Record<string, AnyDef>,
  handlers: Record<string, UntypedHandleCall | undefined>,
  opts: StubOptions,
): Promise<StubServer> {
  const requests: RecordedRequest[] = [];
  const calls: RecordedCall[] = [];
  const def: Record<string, AnyDef> = {};
  const impl: Record<string, UntypedHandleCall> = {};
  for (const [name, d] of Object.entries(service)) {
    def[name] = {
      ...d,
      requestDeserialize: (buf: Buffer) => {
        const request = d.requestDeserialize(buf);
        requests.push({ method: name, request });
        return request;
      },
    };
    const h = handlers[name];
    impl[name] = ((call: { metadata: { get(k: string): unknown[] } }, cb?: (err: unknown) => void) => {
      const auth = call.metadata.get('authorization')[0];
      calls.push({ method: name, authorization: auth === undefined ? undefined : String(auth) });
      if (!h) {
        const err = { code: GrpcStatus.UNIMPLEMENTED, details: `stub has no ${name} handler` };
        if (cb) cb(err);
        else (call as unknown as { destroy(e: unknown): void }).destroy(err);
        return;
      }
      (h as (c: unknown, cb?: unknown) => void)(call, cb);
    }) as UntypedHandleCall;
  }
  const server = new Server();
  server.addService(def as ServiceDefinition, impl);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`127.0.0.1:${opts.port ?? 0}`, ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  return {
    address: `http://127.0.0.1:${port}`,
    port,
    requests,
    calls,
    stop: async () => {
      server.forceShutdown();
    },
  };
}

/** Starts a protocol.Journal stub on 127.0.0.1; missing handlers answer UNIMPLEMENTED. */
export function startJournalStub(handlers: Partial<JournalHandlers>, opts: StubOptions = {}): Promise<StubServer> {
  const { replicate: _omit, ...service } = JournalService;
  return startStub(service as unknown as Record<string, AnyDef>, handlers as Record<string, UntypedHandleCall>, opts);
}

/** Starts a consumer.Shard stub on 127.0.0.1; missing handlers answer UNIMPLEMENTED. */
export function startShardStub(handlers: Partial<ShardHandlers>, opts: StubOptions = {}): Promise<StubServer> {
  return startStub(ShardService as unknown as Record<string, AnyDef>, handlers as Record<string, UntypedHandleCall>, opts);
}

/** A Header that passes Go client validation: non-zero etcd fields, the given route. */
export function stubHeader(opts: { route?: Route; revision?: bigint; processId?: { zone: string; suffix: string } } = {}): Header {
  return {
    process_id: opts.processId ?? { zone: 'local', suffix: 'stub' },
    route: opts.route ?? { members: [], primary: -1, endpoints: [] },
    etcd: { cluster_id: 1234n, member_id: 5678n, revision: opts.revision ?? 100n, raft_term: 2n },
  };
}
