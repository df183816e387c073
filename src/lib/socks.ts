// Every connection through a SOCKS5 proxy (a bastion): gRPC to brokers, consumers and etcd, and
// HTTP to fragment stores (S3 API calls, signed fragment URLs of direct reads, a store's health
// check fetch).
//
// * Host names are sent to the proxy unresolved (SOCKS5 "domain name" addresses, what curl calls
//   socks5h), so that a Kubernetes Service name resolves inside the cluster, not here.
// * The proxy of a process is set once (`setSocksServer`, which gazctl does from --socks-server
//   or SOCKS_SERVER_SERVICE_HOST/_PORT); every connecting part of the library consults it, so
//   nothing is forgotten. A ServiceConfig or store option may still name another one.
// * HTTP goes through an http.Agent (https.Agent for https://) whose connections are made
//   through the proxy, TLS on top for https://. (Not `socks-proxy-agent`: its agent-base loads
//   node:https and more at start-up, which the CLI bundle keeps for the commands that use them.)
// * grpc-js has no public way to hand a channel a socket of our own. So each proxied gRPC target
//   gets a tunnel: a listener on a Unix socket in a private directory (mode 0700, so no other
//   local user can use it), whose every accepted connection is carried to the real target
//   through the proxy. The channel dials the tunnel (`unix:<path>`), with `grpc.default_authority`
//   naming the real host:port in :authority; TLS is ours (dial.ts) and already names the real
//   host, or, for grpc-js' own TLS credentials, `grpc.ssl_target_name_override` does.
// * A failure to go through the proxy (the proxy is down; it cannot reach the target) closes the
//   tunnel's connection, which grpc-js sees as a dropped connection: the call is retried as any
//   unavailable service is. The reason is remembered per target (`socksFailure`) so that the
//   final error, when the time budget runs out, can say it.
import { mkdtempSync, rmSync } from 'node:fs';
import { Agent as HttpAgent, type ClientRequestArgs } from 'node:http';
import { Agent as HttpsAgent, type RequestOptions as HttpsRequestOptions } from 'node:https';
import { createServer, isIP, type Server, type Socket } from 'node:net';
import { connect as tlsConnect, type ConnectionOptions } from 'node:tls';
import type { Duplex } from 'node:stream';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ChannelOptions } from '@grpc/grpc-js';
import { SocksClient } from 'socks';
import { ValidationError } from './protocol/errors.js';

/** A SOCKS5 proxy's address. */
export interface SocksServer {
  host: string;
  port: number;
}

/** How long the proxy may take to connect us to a target (handshake included). */
export const SOCKS_CONNECT_TIMEOUT_MS = 10_000;

/**
 * Parses `host:port` (an IPv6 host in brackets: `[::1]:1080`); a `socks5h://` or `socks5://`
 * prefix is accepted (names are resolved by the proxy either way). '' means no proxy.
 */
export function parseSocksServer(text: string): SocksServer | undefined {
  const t = text.trim().replace(/^socks5h?:\/\//i, '').replace(/\/$/, '');
  if (t === '') return undefined;
  const bad = (why: string): never => {
    throw new ValidationError(`SOCKS server ${JSON.stringify(text)}: ${why} (expected host:port)`);
  };
  const m = /^(?:\[([^\]]+)\]|([^:[\]/@]+)):(\d+)$/.exec(t);
  if (!m) return bad(/^[^:]+$/.test(t) ? 'missing port' : 'not host:port');
  const host = m[1] ?? m[2]!;
  if (m[1] !== undefined && isIP(host) !== 6) bad('brackets must hold an IPv6 address');
  const port = Number(m[3]);
  if (!Number.isInteger(port) || port < 1 || port > 65535) bad('port must be 1 to 65535');
  return { host, port };
}

/** `host:port`, an IPv6 host in brackets. */
export function formatSocksServer(s: SocksServer): string {
  return isIP(s.host) === 6 ? `[${s.host}]:${s.port}` : `${s.host}:${s.port}`;
}

let processServer: SocksServer | undefined;

/**
 * Sets (or, with undefined or '', clears) the SOCKS5 proxy of every connection this process
 * makes from now on through the library. Throws ValidationError on a malformed address.
 */
export function setSocksServer(server: SocksServer | string | undefined): void {
  processServer = typeof server === 'string' ? parseSocksServer(server) : server;
}

/** The process's SOCKS5 proxy, if one is set. */
export function socksServer(): SocksServer | undefined {
  return processServer;
}

/** Why going through the proxy failed, as one phrase naming the proxy. */
function describeFailure(server: SocksServer, host: string, port: number, err: unknown): string {
  const msg = (err as Error)?.message ?? String(err);
  const rejected = /^Socks5 proxy rejected connection - (\w+)/.exec(msg);
  const proxy = `SOCKS server ${formatSocksServer(server)}`;
  if (rejected) return `${proxy} could not connect to ${host}:${port} (${rejected[1]})`;
  return `${proxy}: ${msg.replace(/^Proxy connection timed out$/, 'no answer in time')}`;
}

/** An error connecting through the proxy; the message names the proxy and the target. */
export class SocksConnectError extends Error {}

/** A TCP connection to `host:port` through the SOCKS5 proxy `server` (names resolved by the proxy). */
export async function socksConnect(server: SocksServer, host: string, port: number, timeoutMs = SOCKS_CONNECT_TIMEOUT_MS): Promise<Socket> {
  try {
    const { socket } = await SocksClient.createConnection({
      proxy: { host: server.host, port: server.port, type: 5 },
      command: 'connect',
      destination: { host, port },
      timeout: timeoutMs,
      set_tcp_nodelay: true,
    });
    return socket;
  } catch (err) {
    throw new SocksConnectError(describeFailure(server, host, port, err), { cause: err });
  }
}

const agents = new Map<string, HttpAgent>();

/** The host name a request connects to (brackets of an IPv6 literal removed). */
function requestHost(o: ClientRequestArgs): string {
  return String(o.hostname ?? o.host ?? 'localhost').replace(/^\[|\]$/g, '');
}

/**
 * The http.Agent carrying requests through `server` (for `secure`: an https.Agent, TLS on top,
 * the server name and certificate checked against the real host), one per proxy and kind,
 * keeping connections alive between requests.
 */
export function socksAgent(server: SocksServer, secure: boolean): HttpAgent {
  const key = `${secure ? 'https' : 'http'} ${formatSocksServer(server)}`;
  let a = agents.get(key);
  if (!a) {
    const connect = (o: ClientRequestArgs, cb: (err: Error | null, s: Duplex) => void, wrap: (s: Socket) => Duplex) => {
      const host = requestHost(o);
      const port = Number(o.port ?? (secure ? 443 : 80));
      socksConnect(server, host, port).then(
        (s) => {
          let out: Duplex;
          try {
            out = wrap(s);
          } catch (err) {
            s.destroy();
            cb(err as Error, s);
            return;
          }
          cb(null, out);
        },
        (err: Error) => cb(err, undefined as unknown as Duplex),
      );
      return undefined;
    };
    if (secure) {
      // Made here, not at load: the CLI bundle loads node:https (and node:http) only when used.
      class SocksHttpsAgent extends HttpsAgent {
        override createConnection(o: HttpsRequestOptions, cb?: (err: Error | null, s: Duplex) => void): Duplex | null | undefined {
          return connect(o, cb!, (socket) => {
            const host = requestHost(o);
            const tls: ConnectionOptions = { ...(o as ConnectionOptions), socket, host, ...(isIP(host) ? {} : { servername: o.servername || host }) };
            delete (tls as { path?: string }).path; // the request's path, not a socket path
            return tlsConnect(tls);
          });
        }
      }
      a = new SocksHttpsAgent({ keepAlive: true });
    } else {
      class SocksHttpAgent extends HttpAgent {
        override createConnection(o: ClientRequestArgs, cb?: (err: Error | null, s: Duplex) => void): Duplex | null | undefined {
          return connect(o, cb!, (socket) => socket);
        }
      }
      a = new SocksHttpAgent({ keepAlive: true });
    }
    agents.set(key, a);
  }
  return a;
}

// ---- gRPC tunnels ---------------------------------------------------------------------------

/** Latest failure to reach each `host:port` target through a proxy, with when it happened. */
const failures = new Map<string, { at: number; why: string }>();

/**
 * Why the last connection to `target` (`host:port`) through a proxy failed, if it failed within
 * the last `withinMs`; undefined when it did not, or no proxy is involved.
 */
export function socksFailure(target: string, withinMs = 30_000): string | undefined {
  const f = failures.get(target);
  return f && Date.now() - f.at <= withinMs ? f.why : undefined;
}

/** The latest failure to reach any target through a proxy within the last `withinMs`. */
export function latestSocksFailure(withinMs = 30_000): string | undefined {
  let latest: { at: number; why: string } | undefined;
  for (const f of failures.values()) if (!latest || f.at > latest.at) latest = f;
  return latest && Date.now() - latest.at <= withinMs ? latest.why : undefined;
}

let tunnelDir: string | undefined;
let tunnelSeq = 0;

function newTunnelPath(): string {
  if (!tunnelDir) {
    // mkdtemp makes the directory with mode 0700.
    const dir = mkdtempSync(join(tmpdir(), 'gazctl-socks-'));
    tunnelDir = dir;
    process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  }
  return join(tunnelDir, `${process.pid}-${++tunnelSeq}.sock`);
}

/**
 * A local listener whose connections are carried to `host:port` through the proxy. Its listener
 * does not keep the process alive; the connections grpc-js holds on it do, as a direct
 * connection would.
 */
export class SocksTunnel {
  readonly path: string;
  private readonly server: Server;
  private readonly live = new Set<Socket>();

  constructor(
    readonly socks: SocksServer,
    readonly host: string,
    readonly port: number,
  ) {
    this.path = newTunnelPath();
    this.server = createServer({ pauseOnConnect: true }, (local) => this.accept(local));
    this.server.on('error', () => {}); // a listen error shows as connections refused to grpc-js
    // Binding a Unix socket happens synchronously, before listen() returns.
    this.server.listen(this.path);
    this.server.unref();
  }

  private accept(local: Socket): void {
    this.live.add(local);
    local.on('close', () => this.live.delete(local));
    local.on('error', () => {});
    const target = `${this.host}:${this.port}`;
    socksConnect(this.socks, this.host, this.port).then(
      (remote) => {
        failures.delete(target);
        if (local.destroyed) {
          remote.destroy();
          return;
        }
        this.live.add(remote);
        remote.on('close', () => {
          this.live.delete(remote);
          local.destroy();
        });
        remote.on('error', () => remote.destroy());
        // HTTP/2 has no use for a half-closed connection: the target's end is the connection's,
        // and grpc-js must hear of it at once (as it would from a direct socket), not when it
        // next writes, or a call started meanwhile fails as dropped rather than unsent.
        remote.on('end', () => local.destroy());
        local.on('close', () => remote.destroy());
        local.pipe(remote);
        remote.pipe(local);
        local.resume();
      },
      (err: Error) => {
        failures.set(target, { at: Date.now(), why: err.message });
        local.destroy();
      },
    );
  }

  /** Stops listening and drops the connections carried. */
  close(): void {
    this.server.close();
    for (const s of this.live) s.destroy();
    this.live.clear();
  }
}

/** `host:port` → its parts (brackets of an IPv6 literal removed). */
function splitTarget(target: string): { host: string; port: number } {
  const i = target.lastIndexOf(':');
  return { host: target.slice(0, i).replace(/^\[|\]$/g, ''), port: Number(target.slice(i + 1)) };
}

/**
 * How grpc-js should dial the `host:port` target through `server`: a tunnel's Unix socket as
 * target, and the channel options that keep naming the real host (for :authority and, with
 * grpc-js' own TLS credentials, the server name checked). Close the tunnel with the channel.
 */
export function socksGrpcTarget(target: string, server: SocksServer): { target: string; options: ChannelOptions; tunnel: SocksTunnel } {
  const { host, port } = splitTarget(target);
  const tunnel = new SocksTunnel(server, host, port);
  return {
    target: `unix:${tunnel.path}`,
    options: { 'grpc.default_authority': target, 'grpc.ssl_target_name_override': host },
    tunnel,
  };
}
