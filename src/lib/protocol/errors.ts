// Typed errors shared by the library and the CLI. The CLI prints `message` as one line on
// stderr and exits with `exitCode`; library users can switch on the class and its fields.
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
  /** Process exit code the CLI uses for this error. */
  exitCode = 1;
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

/** A transport-level failure: unreachable service, deadline, cancelled, auth. */
export class TransportError extends GazctlError {
  constructor(message: string, readonly code?: number, options?: { cause?: unknown }) {
    super(message, options);
  }
}
