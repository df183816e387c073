// Public API of the gazctl library: protocol types and helpers, routed retrying clients,
// YAML spec formats, and the append machinery the CLI uses.
export * from './protocol/index.js';
export * from './client/index.js';
// Our routed, retrying client wins over the generated grpc-js constructor of the same name.
export { JournalClient } from './client/index.js';
export * from './spec/index.js';
export * from './append/framing.js';
export * from './append/mapping.js';
export * from './append/service.js';
export * from './config/ini.js';
