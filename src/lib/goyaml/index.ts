// The Go yaml.v2-compatible YAML emitter and strict decoder shared by the journal and shard
// spec formats.
export {
  decodeStrict,
  emitGoYaml,
  enumNames,
  goStringStyle,
  resolvePlain,
  StrictDoc,
  YamlDecodeError,
  type ResolvedKind,
  type YamlMapping,
  type YamlValue,
} from './goyaml.js';
