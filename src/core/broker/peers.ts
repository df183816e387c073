// gRPC clients of the other brokers, one per endpoint, shared by proxying and replication.
//
// A peer's endpoint says whether it speaks TLS (https://); such peers are dialled with the
// broker's peer TLS settings (--broker.peer-*). With auth keys, every call carries a token
// signed with the first key for the claims that call needs, as a Go broker's self-signed calls.

import { credentials, type Metadata } from '@grpc/grpc-js';
import type { SecureContext } from 'node:tls';
import { tlsCredentials } from '../../lib/client/dial.js';
import { authMetadata, claimsFor, type Authorizer, type Claims } from '../../lib/client/auth.js';
import { JournalClient } from '../../lib/protocol/gen/broker/protocol.js';
import { FlushClient } from '../../lib/protocol/gen/gazctl/flush.js';
import { ReplicateSessions, type ReplicateCall, type ReplicateCallHandlers } from './replicate-client.js';

export interface PeersOptions {
  /** TLS context for https:// peers (default: the system roots, no client certificate). */
  tls?: SecureContext;
  /** Signs this broker's calls to its peers (default: no authorization). */
  authorize?: Authorizer;
  maxMessageBytes?: number;
}

export class Peers {
  private readonly clients = new Map<string, JournalClient>();
  private readonly flushClients = new Map<string, FlushClient>();
  /** Replication streams go over HTTP/2 connections of their own (replicate-client.ts). */
  private readonly replicateSessions: ReplicateSessions;
  private readonly maxMessageBytes: number;
  private readonly authorize: Authorizer;

  constructor(private readonly opts: PeersOptions = {}) {
    this.maxMessageBytes = opts.maxMessageBytes ?? 16 << 20;
    this.authorize = opts.authorize ?? (() => undefined);
    this.replicateSessions = new ReplicateSessions(opts.tls);
  }

  /** Metadata authorizing one call with `claims`. */
  metadata(claims: Claims): Metadata {
    return authMetadata(this.authorize, claims);
  }

  client(endpoint: string): JournalClient {
    let c = this.clients.get(endpoint);
    if (!c) {
      const u = new URL(endpoint);
      const creds = u.protocol === 'https:' ? tlsCredentials(this.opts.tls, u.host) : credentials.createInsecure();
      c = new JournalClient(u.host, creds, {
        'grpc.max_receive_message_length': this.maxMessageBytes,
        'grpc.max_send_message_length': this.maxMessageBytes,
        // A restarted peer on the same port should be reachable again quickly.
        'grpc.initial_reconnect_backoff_ms': 100,
        'grpc.max_reconnect_backoff_ms': 1000,
      });
      this.clients.set(endpoint, c);
    }
    return c;
  }

  /** The on-demand flush service of `endpoint`, on the same channel as its Journal client. */
  flush(endpoint: string): FlushClient {
    let c = this.flushClients.get(endpoint);
    if (!c) {
      const j = this.client(endpoint);
      c = new FlushClient(new URL(endpoint).host, credentials.createInsecure(), { channelOverride: j.getChannel() });
      this.flushClients.set(endpoint, c);
    }
    return c;
  }

  /** A Replicate stream of `journal` to the broker at `endpoint`. */
  openReplicate(endpoint: string, journal: string, handlers: ReplicateCallHandlers): ReplicateCall {
    return this.replicateSessions.open(endpoint, handlers, this.authorize(claimsFor.journalReplicate(journal)));
  }

  close(): void {
    this.replicateSessions.close();
    for (const c of this.clients.values()) c.close();
    this.clients.clear();
    this.flushClients.clear();
  }
}
