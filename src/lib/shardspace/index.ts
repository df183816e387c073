// The shard set YAML format: a `common` partial ShardSpec shared by a list of `shards`.
export {
  buildShardApplyRequest,
  decodeShardSet,
  encodeShardSet,
  encodeShardSetBytes,
  flattenShardSet,
  normalizeShardSpec,
  shardSetFromListing,
  validateShardSet,
  type ShardSet,
  type ShardSetEntry,
} from './shardspace.js';
