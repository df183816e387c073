// Public API of the client library.
export { JournalClient, type JournalClientOptions, type ListFragmentsOptions } from './journal-client.js';
export { FlushClient, FlushUnsupportedError, type FlushClientOptions, type FlushResult } from './flush-client.js';
export {
  ShardClient,
  type ShardClientOptions,
  UNASSIGN_TIMEOUT_MS,
  UNASSIGN_BATCH_SIZE,
  UnassignError,
  type UnassignBatch,
  type UnassignResult,
} from './shard-client.js';
export { Reader, type ReadChunk, type ReaderOptions, type RetryInfo, type ReadTransport } from './reader.js';
export {
  Appender,
  appendOnce,
  appendMayHaveCommitted,
  describeAppendWait,
  isRetryableAppendError,
  isRetryableQueuedAppendError,
  isUnreachablePrimary,
  MAX_APPEND_MESSAGE, type AppendOptions, type AppendTransport } from './appender.js';
export { ConnectionPool, dialTarget, CHANNEL_OPTIONS, MAX_RECEIVE_MESSAGE, type ServiceConfig } from './dial.js';
export { AuthError, KeyVerifier, parseVerifyKeys, verifyToken, checkCapability, LEEWAY_SEC, type VerifiedClaims } from './verify.js';
export { Capability, claimsFor, makeAuthorizer, parseAuthKeys, selectorClaimJson, signJwt, type Authorizer, type Claims } from './auth.js';
export {
  backoff,
  backoffBase,
  withJitter,
  sleep,
  retry,
  grpcCode,
  isUnavailable,
  isTransient,
  isTransientBrokerStatus,
  isTransientConsumerStatus,
  isTransientStreamCode,
  isAbortError,
  abortError,
  type RetryOptions,
} from './retry.js';
export { RouteCache, pickEndpoint, type DispatchOptions, type EndpointState } from './route-cache.js';
export {
  openFragment,
  openFragmentFrom,
  decodeFragmentStream,
  DirectReadError,
  DirectReadUnsupportedError,
  type OpenFragmentOptions,
  type OpenedFragment,
} from './direct/fragment-fetch.js';
export {
  readFragmentRun,
  FragmentRunError,
  DEFAULT_RUN_CONCURRENCY,
  DEFAULT_RUN_BUDGET,
  type FragmentRunOptions,
  type RunEvent,
  type RunItem,
} from './direct/parallel-fetch.js';
export { verifyFragment, type VerifyOutcome, type VerifySource } from './fragment-verify.js';
export { retryCall, transportError, describeGrpcError, type CallOptions, type RetryHook, type RetryPolicy } from './rpc.js';
export { ServiceClient, mergeCallOptions, type CallDefaults, type Dispatch } from './call.js';
export { JournalWatch, type WatchSource } from './watch.js';
export { batchChanges, batchCount, ETCD_DEFAULT_MAX_TXN_OPS } from './batch.js';
export {
  applyInBatches,
  ApplyError,
  type ApplyBatchInfo,
  type ApplyFailureReason,
  type ApplyOptions,
  type ApplyResult,
  type ApplyService,
} from './apply.js';
export {
  planChanges,
  planJournalChanges,
  planShardChanges,
  planSelector,
  commonDirPrefix,
  journalPlanSubject,
  shardPlanSubject,
  type ApplyPlan,
  type PlanKind,
  type PlannedChange,
  type PlanSubject,
} from './plan.js';
export * from './append-service.js';
export { AppendMetrics, type AppendFiguresSource } from './append-metrics.js';
export {
  indexEnd,
  isUnknownSuspendMode,
  requestSuspend,
  resetHeadAt,
  suspendLevel,
  type OpsClient,
  type ResetOutcome,
  type SuspendOutcome,
} from './journal-ops.js';
export { Publisher, type PublisherOptions, type Published } from './publisher.js';
