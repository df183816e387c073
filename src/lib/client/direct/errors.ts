// The errors of direct fragment reads, in a module of their own so that the fetching code and
// the raw HTTP getter can both throw them without importing each other.
import { GazctlError } from '../../protocol/errors.js';

/** A direct fragment read failed (HTTP status, I/O, corrupt or mis-sized content). */
export class DirectReadError extends GazctlError {}

/**
 * This client cannot read the fragment directly (codec without a decoder in this Node, URL
 * scheme without a handler, no file root); the caller should read through a broker instead.
 */
export class DirectReadUnsupportedError extends DirectReadError {}
