// The recovery log's CRC-32C is the library's (src/lib/crc32c.ts), shared with the snappy codec.
export * from '../crc32c.js';
