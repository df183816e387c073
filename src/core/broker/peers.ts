// gRPC clients of the other brokers, one per endpoint, shared by proxying and replication.

import { credentials } from '@grpc/grpc-js';
import { JournalClient } from '../../lib/protocol/gen/broker/protocol.js';
import { FlushClient } from '../../lib/protocol/gen/gazctl/flush.js';
import { ReplicateSessions, type ReplicateCall, type ReplicateCallHandlers } from './replicate-client.js';

export class Peers {
  private readonly clients = new Map<string, JournalClient>();
  private readonly flushClients = new Map<string, FlushClient>();
  /** Replication streams go over HTTP/2 connections of their own (replicate-client.ts). */
  private readonly replicateSessions = new ReplicateSessions();

  constructor(private readonly maxMessageBytes = 16 << 20) {}

  client(endpoint: string): JournalClient {
    let c = this.clients.get(endpoint);
    if (!c) {
      const u = new URL(endpoint);
      c = new JournalClient(u.host, credentials.createInsecure(), {
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

  /** A Replicate stream to the broker at `endpoint`. */
  openReplicate(endpoint: string, handlers: ReplicateCallHandlers): ReplicateCall {
    return this.replicateSessions.open(endpoint, handlers);
  }

  close(): void {
    this.replicateSessions.close();
    for (const c of this.clients.values()) c.close();
    this.clients.clear();
    this.flushClients.clear();
  }
}
