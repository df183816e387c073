// The protocol layer: generated broker/consumer/recoverylog messages plus hand-written
// extensions (labels, selectors, validation, fragments, routes, proto3-JSON output).
export * from './gen/broker/protocol.js';
export * as consumer from './gen/consumer/protocol.js';
export * as recoverylog from './gen/recoverylog/recorded_op.js';
export { Duration } from './gen/google/protobuf/duration.js';

export * from './duration.js';
export * from './errors.js';
export * from './labels.js';
export * from './selector.js';
export * from './validate/index.js';
export * from './fragment.js';
export * from './route.js';
export * from './protojson.js';
export * from './labelsets.js';
export * from './enums.js';
export {
  journalSpecFromProtoJson,
  journalsFromListJson,
  parseProtoJsonDuration,
  shardSpecFromProtoJson,
  shardsFromListJson,
} from './protojson-parse.js';
