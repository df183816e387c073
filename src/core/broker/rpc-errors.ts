// gRPC errors as our broker's services send them.

import { Metadata, status as GrpcStatus, type ServiceError } from '@grpc/grpc-js';
import { RpcError } from './append.js';

/** A gRPC error with `code` and `details`. */
export function rpcError(code: GrpcStatus, details: string): ServiceError {
  return Object.assign(new Error(details), { code, details, metadata: new Metadata() });
}

/**
 * `e` as a gRPC error: an RpcError or an error that already carries a gRPC code keeps it; any
 * other failure gets `otherwise.code`, its message after `otherwise.prefix`.
 */
export function toServiceError(e: unknown, otherwise: { code: GrpcStatus; prefix?: string } = { code: GrpcStatus.UNKNOWN }): ServiceError {
  if (e instanceof RpcError) return rpcError(e.code, e.message);
  const se = e as Partial<ServiceError>;
  if (typeof se.code === 'number') return rpcError(se.code, se.details ?? (e as Error).message);
  return rpcError(otherwise.code, `${otherwise.prefix ?? ''}${(e as Error).message}`);
}
