// Test helpers: the local-cluster harness (real etcd + brokers) and reference-peer runners.
// Exposed to users as `gazctl/testing`.

export * from './peers.js';
export * from './ports.js';
export * from './process.js';
export * from './etcd.js';
export * from './brokers.js';
export * from './cluster.js';
export * from './consumers.js';
export * from './assignments.js';
export * from './gazctl-go.js';
export * from './stubs.js';
export * from './s3.js';
export * from './certs.js';
export * from './toxiproxy.js';
export * from './socks.js';
export * from './netns.js';
