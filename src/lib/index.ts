// Public API of the gazctl library: protocol types and helpers, routed retrying clients,
// YAML spec formats, codecs, and the append machinery the CLI uses.
export * from './protocol/index.js';
export * from './client/index.js';
// Our routed, retrying client wins over the generated grpc-js constructor of the same name.
export { JournalClient } from './client/index.js';
export * from './goyaml/index.js';
export * from './journalspace/index.js';
export * from './shardspace/index.js';
export * from './message/index.js';
export * from './recoverylog/index.js';
export * from './codecs/index.js';
export * from './config/ini.js';
// Fragment stores. (The etcd keyspace is its own entry point, `gazctl/keyspace`: etcd3 loads its
// protos from its package directory when imported, which the CLI bundle must not pay for.)
export * from './stores/index.js';
export * from './concurrency.js';
// SOCKS5 proxies for every connection (docs/networking.md).
export { setSocksServer, socksServer, parseSocksServer, formatSocksServer, socksConnect, socksAgent, SocksConnectError, type SocksServer } from './socks.js';
