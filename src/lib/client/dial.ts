// Connections: one gRPC channel per endpoint (http://, https://, unix://), shared by every stub
// dialed to it, plus the per-call metadata carrying authorization.
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { connect as tlsConnect, createSecureContext, type SecureContext } from 'node:tls';
import { CallCredentials, Channel, ChannelCredentials, connectivityState, credentials, type Metadata, type ChannelOptions } from '@grpc/grpc-js';
import { JournalClient as GenJournalClient } from '../protocol/gen/broker/protocol.js';
import { ShardClient as GenShardClient } from '../protocol/gen/consumer/protocol.js';
import { TransportError, ValidationError } from '../protocol/errors.js';
import { parseEndpoint } from '../protocol/route.js';
import { socksGrpcTarget, socksServer, type SocksServer, type SocksTunnel } from '../socks.js';
import { authMetadata, makeAuthorizer, type Authorizer, type Claims } from './auth.js';
import type { EndpointState } from './route-cache.js';

/** How to reach and authenticate to one service (brokers, or consumers). */
export interface ServiceConfig {
  /** Service endpoint: http://host:port, https://host:port or unix://host/abs/path. */
  address: string;
  /** Client certificate (PEM) for TLS endpoints. */
  certFile?: string;
  /** Key of the client certificate (PEM). */
  certKeyFile?: string;
  /** CA bundle (PEM) replacing the system roots for TLS endpoints. */
  trustedCAFile?: string;
  /** Pre-shared bearer token, sent verbatim. */
  authToken?: string;
  /** Shared JWT signing keys (standard base64, whitespace/comma separated); the first signs. */
  authKeys?: string;
  /** Zone of this client, preferred when dispatching to route members. */
  zone?: string;
  /** Route cache size; 0 (default) disables the cache and direct dispatch. */
  cacheSize?: number;
  /** Route cache entry lifetime (default 60 s). */
  cacheTTLms?: number;
  /**
   * SOCKS5 proxy carrying every connection to the service (names resolved by the proxy);
   * default: the process's (`setSocksServer`), if any. unix:// endpoints are always direct.
   */
  socksServer?: SocksServer;
}

/** 16 MiB, as Go clients allow. */
export const MAX_RECEIVE_MESSAGE = 16 * 1024 * 1024;

/** Channel options used for every connection. */
export const CHANNEL_OPTIONS: ChannelOptions = {
  'grpc.max_receive_message_length': MAX_RECEIVE_MESSAGE,
  'grpc.max_send_message_length': MAX_RECEIVE_MESSAGE,
  // Go servers reject pings more often than every 5 minutes by default (GOAWAY too_many_pings).
  'grpc.keepalive_time_ms': 5 * 60_000,
  'grpc.keepalive_timeout_ms': 20_000,
  'grpc.keepalive_permit_without_calls': 0,
  'grpc.initial_reconnect_backoff_ms': 100,
  'grpc.max_reconnect_backoff_ms': 5_000,
  // We retry at the application level; grpc-js' own retries would buffer appended content.
  'grpc.enable_retries': 0,
  'grpc-node.flow_control_window': 16 * 1024 * 1024,
};

/** gRPC target and security of an endpoint URL. */
export function dialTarget(endpoint: string): { target: string; secure: boolean } {
  const ep = parseEndpoint(endpoint);
  return { target: ep.target, secure: ep.secure };
}

interface Conn {
  /** The grpc-js channel, made when a call first needs it. */
  channel?: Channel;
  /** The channel's way through the SOCKS proxy, when there is one. */
  tunnel?: SocksTunnel;
  journal?: GenJournalClient;
  shard?: GenShardClient;
}

/**
 * A pool of channels keyed by endpoint, with the service's TLS settings and authorization.
 * Every stub it hands out shares the endpoint's channel.
 */
export class ConnectionPool {
  private readonly conns = new Map<string, Conn>();
  private tls: SecureContext | undefined;
  readonly authorize: Authorizer;
  private closed = false;

  constructor(readonly config: ServiceConfig) {
    this.authorize = makeAuthorizer(config);
    // Fail early on a malformed service address.
    dialTarget(config.address);
  }

  private credentialsFor(secure: boolean, target: string): ChannelCredentials {
    if (!secure) return credentials.createInsecure();
    return new TlsCredentials(this.secureContext(), hostOf(target));
  }

  /** The TLS context of this service's https:// endpoints (made once). */
  private secureContext(): SecureContext {
    if (!this.tls) {
      const read = (f: string | undefined, what: string) => {
        if (!f) return undefined;
        try {
          return readFileSync(f);
        } catch (err) {
          throw new ValidationError(`reading ${what} ${f}: ${(err as Error).message}`);
        }
      };
      const ca = read(this.config.trustedCAFile, 'trusted CA file');
      const cert = read(this.config.certFile, 'certificate file');
      const key = read(this.config.certKeyFile, 'certificate key file');
      if ((cert === undefined) !== (key === undefined)) {
        throw new ValidationError('a client certificate needs both a certificate file and a key file');
      }
      this.tls = createSecureContext({ ca, cert, key });
    }
    return this.tls;
  }

  private entry(endpoint: string | undefined): { ep: string; c: Conn } {
    if (this.closed) throw new TransportError('connection pool is closed');
    const ep = endpoint || this.config.address;
    let c = this.conns.get(ep);
    if (!c) {
      dialTarget(ep);
      c = {};
      this.conns.set(ep, c);
    }
    return { ep, c };
  }

  /** The endpoint's grpc-js channel (made on first use). */
  private channel(endpoint: string | undefined): Channel {
    const { ep, c } = this.entry(endpoint);
    if (!c.channel) {
      const { target, secure } = dialTarget(ep);
      const socks = this.config.socksServer ?? socksServer();
      if (socks && !target.startsWith('unix:')) {
        // Through the proxy: the channel dials a local tunnel; TLS and :authority name `target`.
        const t = socksGrpcTarget(target, socks);
        c.tunnel = t.tunnel;
        c.channel = new Channel(t.target, this.credentialsFor(secure, target), { ...CHANNEL_OPTIONS, ...t.options });
      } else {
        c.channel = new Channel(target, this.credentialsFor(secure, target), CHANNEL_OPTIONS);
      }
    }
    return c.channel;
  }

  /** Generated Journal stub for `endpoint` (default: the service address). */
  journal(endpoint?: string): GenJournalClient {
    const channel = this.channel(endpoint);
    const { c } = this.entry(endpoint);
    c.journal ??= new GenJournalClient('unused', credentials.createInsecure(), { channelOverride: channel });
    return c.journal;
  }

  /** Generated Shard stub for `endpoint` (default: the service address). */
  shard(endpoint?: string): GenShardClient {
    const channel = this.channel(endpoint);
    const { c } = this.entry(endpoint);
    c.shard ??= new GenShardClient('unused', credentials.createInsecure(), { channelOverride: channel });
    return c.shard;
  }

  /**
   * Starts connecting to `endpoint` (default: the service address) without making a call, so
   * that the connection is set up while the caller does other work (e.g. reads its input); the
   * first call would otherwise start it. Problems (an unreadable certificate, say) are left to
   * that first call, which meets them again: this never throws.
   */
  connect(endpoint?: string): void {
    try {
      this.channel(endpoint).getConnectivityState(true);
    } catch {
      // The first call reports it.
    }
  }

  /** Connection state of an endpoint ('none' when never dialed): its grpc-js channel's. */
  state(endpoint: string): EndpointState {
    const c = this.conns.get(endpoint);
    if (!c?.channel) return 'none';
    return this.channelState(c.channel);
  }

  private channelState(channel: Channel): EndpointState {
    switch (channel.getConnectivityState(false)) {
      case connectivityState.READY:
        return 'ready';
      case connectivityState.CONNECTING:
        return 'connecting';
      case connectivityState.IDLE:
        return 'idle';
      default:
        return 'failed';
    }
  }

  /** Call metadata for an RPC with `claims` (authorization when configured). */
  metadata(claims: Claims): Metadata {
    return authMetadata(this.authorize, claims);
  }

  /** Closes every channel. */
  close(): void {
    this.closed = true;
    for (const c of this.conns.values()) {
      c.channel?.close();
      c.tunnel?.close();
    }
    this.conns.clear();
  }
}

/**
 * Channel credentials for TLS to `target` (`host:port`) with `context` (default: the system
 * roots, no client certificate), sending SNI only for host names (see TlsCredentials).
 */
export function tlsCredentials(context: SecureContext | undefined, target: string): ChannelCredentials {
  return new TlsCredentials(context ?? createSecureContext({}), hostOf(target));
}

/** The host of a `host:port` dial target (brackets of an IPv6 literal removed). */
function hostOf(target: string): string {
  const i = target.lastIndexOf(':');
  return (i < 0 ? target : target.slice(0, i)).replace(/^\[|\]$/g, '');
}

/**
 * TLS for one endpoint. Unlike grpc-js' own TLS credentials, it sends the host as the TLS server
 * name (SNI) only when it is a host name: RFC 6066 forbids IP addresses there, and Node warns
 * (DEP0123) on every connection to an address like https://10.0.0.5:8080. The certificate is still
 * checked against the IP address. A certificate that does not verify fails the connection with
 * Node's reason (see transport-diagnosis.ts).
 */
class TlsCredentials extends ChannelCredentials {
  constructor(
    private readonly context: SecureContext,
    private readonly host: string,
  ) {
    super();
  }

  _isSecure(): boolean {
    return true;
  }

  _equals(other: ChannelCredentials): boolean {
    return other === this;
  }

  _createSecureConnector(...[, , callCredentials]: Parameters<ChannelCredentials['_createSecureConnector']>): ReturnType<ChannelCredentials['_createSecureConnector']> {
    const { context, host } = this;
    return {
      connect: (socket) =>
        new Promise((resolve, reject) => {
          const s = tlsConnect({ socket, secureContext: context, host, ALPNProtocols: ['h2'], ...(isIP(host) ? {} : { servername: host }) }, () => {
            if (!s.authorized) reject(s.authorizationError);
            else resolve({ socket: s, secure: true });
          });
          s.once('error', reject);
        }),
      waitForReady: () => Promise.resolve(),
      getCallCredentials: () => callCredentials ?? CallCredentials.createEmpty(),
      destroy: () => {},
    };
  }
}
