// Typed errors shared by the library and the CLI. Library users switch on the class and its
// fields; the CLI prints `message` as one line on stderr and picks the exit code from the class.
import { Status } from './gen/broker/protocol.js';
import { Status as ConsumerStatus } from './gen/consumer/protocol.js';

/** Name of a broker status, or its number when unknown to this build. */
export function brokerStatusName(s: Status): string {
  return Status[s] ?? String(s);
}

/** Name of a consumer status, or its number when unknown to this build. */
export function consumerStatusName(s: ConsumerStatus): string {
  return ConsumerStatus[s] ?? String(s);
}

export class GazctlError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** Input that does not satisfy the protocol's rules (names, labels, specs, selectors, YAML). */
export class ValidationError extends GazctlError {
  constructor(message: string, readonly path?: string) {
    super(path ? `${path}: ${message}` : message);
  }
}

/** A broker answered with a non-OK protocol.Status. */
export class BrokerStatusError extends GazctlError {
  readonly statusName: string;
  constructor(readonly status: Status, readonly context: string, detail?: string) {
    const name = brokerStatusName(status);
    super(`${context}: ${name}${detail ? ` (${detail})` : ''}`);
    this.statusName = name;
  }
}

/** A consumer answered with a non-OK consumer.Status. */
export class ConsumerStatusError extends GazctlError {
  readonly statusName: string;
  constructor(readonly status: ConsumerStatus, readonly context: string, detail?: string) {
    const name = consumerStatusName(status);
    super(`${context}: ${name}${detail ? ` (${detail})` : ''}`);
    this.statusName = name;
  }
}

/**
 * Why a connection-level failure happened, when it is known:
 * - `unreachable`: no connection could be made (refused, no route, DNS) before time ran out;
 * - `no-answer`: the connection stood but the service did not answer a call in time (a broker
 *   does this while its etcd does not respond);
 * - `untrusted-certificate`: TLS was refused because the server's certificate did not verify
 *   against the trusted CAs (or did not name the host);
 * - `tls-expected`: the endpoint speaks TLS but was dialled in plain text (http://);
 * - `unresolved`: the endpoint's host name does not exist in DNS (NXDOMAIN: the resolver gave a
 *   definite answer, unlike a timed-out or failing resolver, which is retried as unreachable).
 */
export type TransportReason = 'unreachable' | 'no-answer' | 'untrusted-certificate' | 'tls-expected' | 'unresolved';

/** A transport-level failure: unreachable service, deadline, cancelled, auth. */
export class TransportError extends GazctlError {
  constructor(
    message: string,
    readonly code?: number,
    options?: { cause?: unknown; reason?: TransportReason; endpoint?: string },
  ) {
    super(message, options);
    this.reason = options?.reason;
    this.endpoint = options?.endpoint;
  }
  /** The cause, when the transport could tell it. */
  readonly reason?: TransportReason;
  /** The endpoint the failure is about, when known. */
  readonly endpoint?: string;
}
