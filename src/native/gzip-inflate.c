// gazctl's optional native inflate: whole GZIP objects inflated with libdeflate on libuv's thread
// pool, for the direct reads of src/lib/client/direct (see native-inflate.ts, which loads this
// module, and docs/direct-reads.md, "Inflating GZIP", for why).
//
// libdeflate inflates a whole buffer into a whole buffer, with no streaming state between calls:
// on the benchmark journal's content it ran some three times faster than zlib (CRC-32 included:
// libdeflate checks each member's CRC-32 and length itself, with carry-less multiply where the CPU
// has it). It needs the whole output buffer up front, which a direct read has: a fragment's
// content length is its end offset less its begin.
//
// One JavaScript function, `inflate(stored, out)`: inflates every gzip member of `stored` one
// after the other into `out`, on the thread pool, and resolves with the content length, or with
// -1 for anything it does not take on itself. The caller then inflates the object with zlib as
// before, which gives that object's content or its error exactly as it always did. So -1 covers:
//   * a member header other than the plain kind (not gzip, truncated, a reserved flag or a header
//     CRC, which libdeflate would skip without checking while zlib checks it);
//   * any failure inside a member (corrupt deflate data, a bad CRC-32 or length, truncation);
//   * content longer than `out`;
//   * an empty object (zlib has its own word for that).
// After a member, the end of the object or a zero byte ends the content, as Node's gunzip takes it.
//
// Both buffers are held (napi references) until the work has finished, and must not be touched by
// the caller before the promise settles: the thread pool writes into `out` until then.
#include <node_api.h>
#include <libdeflate.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct {
  napi_async_work work;
  napi_deferred deferred;
  napi_ref stored_ref;
  napi_ref out_ref;
  const uint8_t *in;
  size_t in_len;
  uint8_t *out;
  size_t out_cap;
  /* The content length, or -1 (see above); written on the thread pool. */
  double result;
} Job;

/* Whether the member starting at `p` has a header this module takes: gzip magic, deflate, and no
   flag but FTEXT, FEXTRA, FNAME and FCOMMENT. */
static int plain_header(const uint8_t *s, size_t n, size_t p) {
  if (n - p < 10) return 0;
  if (s[p] != 0x1f || s[p + 1] != 0x8b || s[p + 2] != 8) return 0;
  return (s[p + 3] & 0xe2) == 0;
}

static void execute(napi_env env, void *data) {
  (void)env;
  Job *job = data;
  job->result = -1;
  if (job->in_len == 0) return;
  struct libdeflate_decompressor *d = libdeflate_alloc_decompressor();
  if (d == NULL) return;
  size_t p = 0, o = 0;
  for (;;) {
    if (p > 0 && (p >= job->in_len || job->in[p] == 0)) {
      job->result = (double)o;
      break;
    }
    if (!plain_header(job->in, job->in_len, p)) break;
    size_t used = 0, made = 0;
    enum libdeflate_result r =
        libdeflate_gzip_decompress_ex(d, job->in + p, job->in_len - p, job->out + o, job->out_cap - o, &used, &made);
    if (r != LIBDEFLATE_SUCCESS) break;
    p += used;
    o += made;
  }
  libdeflate_free_decompressor(d);
}

static void complete(napi_env env, napi_status status, void *data) {
  Job *job = data;
  napi_value value;
  if (status == napi_ok && napi_create_double(env, job->result, &value) == napi_ok) {
    napi_resolve_deferred(env, job->deferred, value);
  } else {
    napi_value msg, err;
    napi_create_string_utf8(env, "native inflate did not run", NAPI_AUTO_LENGTH, &msg);
    napi_create_error(env, NULL, msg, &err);
    napi_reject_deferred(env, job->deferred, err);
  }
  napi_delete_reference(env, job->stored_ref);
  napi_delete_reference(env, job->out_ref);
  napi_delete_async_work(env, job->work);
  free(job);
}

static napi_value throw_type(napi_env env, const char *message) {
  napi_throw_type_error(env, NULL, message);
  return NULL;
}

/* Reads a Uint8Array (a Buffer included) argument's bytes. */
static int bytes_of(napi_env env, napi_value v, uint8_t **at, size_t *len) {
  bool is;
  if (napi_is_typedarray(env, v, &is) != napi_ok || !is) return 0;
  napi_typedarray_type type;
  size_t length, offset;
  void *base;
  napi_value ab;
  if (napi_get_typedarray_info(env, v, &type, &length, &base, &ab, &offset) != napi_ok) return 0;
  if (type != napi_uint8_array) return 0;
  *at = base;
  *len = length;
  return 1;
}

static napi_value inflate(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 2) return throw_type(env, "inflate(stored, out) takes two Uint8Arrays");
  Job *job = calloc(1, sizeof(Job));
  if (job == NULL) {
    napi_throw_error(env, NULL, "native inflate: out of memory");
    return NULL;
  }
  uint8_t *in;
  if (!bytes_of(env, argv[0], &in, &job->in_len) || !bytes_of(env, argv[1], &job->out, &job->out_cap)) {
    free(job);
    return throw_type(env, "inflate(stored, out) takes two Uint8Arrays");
  }
  job->in = in;
  napi_value promise, name;
  if (napi_create_reference(env, argv[0], 1, &job->stored_ref) != napi_ok ||
      napi_create_reference(env, argv[1], 1, &job->out_ref) != napi_ok ||
      napi_create_promise(env, &job->deferred, &promise) != napi_ok ||
      napi_create_string_utf8(env, "gazctl.inflate", NAPI_AUTO_LENGTH, &name) != napi_ok ||
      napi_create_async_work(env, NULL, name, execute, complete, job, &job->work) != napi_ok ||
      napi_queue_async_work(env, job->work) != napi_ok) {
    napi_throw_error(env, NULL, "native inflate: could not queue the work");
    return NULL;
  }
  return promise;
}

NAPI_MODULE_INIT() {
  napi_value fn, version;
  if (napi_create_function(env, "inflate", NAPI_AUTO_LENGTH, inflate, NULL, &fn) != napi_ok) return NULL;
  if (napi_set_named_property(env, exports, "inflate", fn) != napi_ok) return NULL;
  if (napi_create_string_utf8(env, LIBDEFLATE_VERSION_STRING, NAPI_AUTO_LENGTH, &version) != napi_ok) return NULL;
  if (napi_set_named_property(env, exports, "libdeflate", version) != napi_ok) return NULL;
  return exports;
}
