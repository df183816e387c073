// The etcd keyspace: a client (get, put, delete, transactions, prefix ranges), leases with
// keep-alive, prefix watches that resume across outages, and Gazette's key layout.
//
// Not re-exported from the package root: it loads etcd's protobuf definitions from the etcd3
// package at import time, which the CLI bundle does not carry. Import it from this module.
export * from './keys.js';
export * from './kv.js';
export * from './client.js';
export * from './lease.js';
export * from './watch.js';
export * from './status.js';
export * from './tls.js';
