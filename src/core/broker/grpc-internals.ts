// The one place our broker reaches into grpc-js's private state.
//
// grpc-js keeps the node:http2 servers it makes for a bound or injected port in a private
// `http2Servers` Map (keys are the Http2Servers). Two of our broker's hot paths need them, and
// grpc-js has no public option for either:
//
// - receive windows (server.ts, raiseReceiveWindows): every HTTP/2 session of the service port
//   gets a 4 MiB stream window and a 16 MiB connection window instead of Node's 64 KiB;
// - the Replicate fast path (replicate-server.ts, routeReplicate): Replicate streams are served
//   from the HTTP/2 stream directly instead of through grpc-js's server call.
//
// When a grpc-js upgrade renames or reshapes the field, both quietly fall back to the public
// path (Node's default windows, grpc-js's own Replicate handling): the broker still works,
// slower. test/unit/core/broker/grpc-internals.test.ts fails in that case, and the broker logs
// at debug level which path it took. To measure them, GAZCTL_GRPC_INTERNALS=0 turns both off,
// `windows` or `replicate` keeps that one only.

import type { Http2Server } from 'node:http2';
import type { Server as GrpcServer } from '@grpc/grpc-js';

/** The bypasses through grpc-js's HTTP/2 servers. */
export type GrpcBypass = 'windows' | 'replicate';

/** Whether `bypass` may be used (GAZCTL_GRPC_INTERNALS: unset for both, 0 for none, or the one kept). */
export function grpcInternalsEnabled(bypass: GrpcBypass, env: NodeJS.ProcessEnv = process.env): boolean {
  const v = env.GAZCTL_GRPC_INTERNALS;
  return v === undefined || v === '' || v === bypass;
}

/**
 * The node:http2 servers grpc-js made for `grpc` (after createConnectionInjector or a bind), or
 * undefined when the private field is not what we expect (or the bypasses are turned off).
 */
export function http2ServersOf(grpc: GrpcServer, bypass: GrpcBypass): Http2Server[] | undefined {
  if (!grpcInternalsEnabled(bypass)) return undefined;
  const servers = (grpc as unknown as { http2Servers?: unknown }).http2Servers;
  if (!(servers instanceof Map)) return undefined;
  const out: Http2Server[] = [];
  for (const s of servers.keys()) {
    const server = s as Http2Server | undefined;
    if (typeof server?.on === 'function' && typeof server.listeners === 'function') out.push(server);
  }
  return out.length > 0 ? out : undefined;
}

/** Which path each bypass took, for the debug line and the tripwire test. */
export interface GrpcPaths {
  /** 'raised' (4 MiB stream, 16 MiB connection) or 'node default' (64 KiB). */
  receiveWindows: 'raised' | 'node default';
  /** 'fast path' (replicate-server.ts) or 'grpc-js'; 'not served' without a Journal service (a consumer). */
  replicate: 'fast path' | 'grpc-js' | 'not served';
}
