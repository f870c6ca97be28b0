/*
 * libshard._libshard, the settings tables (_settings.h): one per C settings struct the
 * binding takes keywords for. A row is the Python keyword, what it accepts, where it goes
 * in the struct and a short doc; its default is the struct's default function's, read
 * when the tables are asked for (libshard.settings), never written here.
 *
 * A new setting of a struct is one row here: Reader, Loader, the datasets, their checks,
 * libshard.settings and the type stub all take it from the row.
 */
#include <stddef.h>

#include <shard/shard.h>

#include "_settings.h"

/* Choices are stored as int */
_Static_assert(sizeof(ShardMode) == sizeof(int) && sizeof(ShardCrop) == sizeof(int) &&
                   sizeof(ShardLayout) == sizeof(int) && sizeof(ShardDType) == sizeof(int) &&
                   sizeof(ShardGpuDType) == sizeof(int),
               "the choices' enums are int-sized");

#define ROWS(rows) rows, sizeof rows / sizeof *rows

static const char fields_words[] = "a ';'-separated string of field names";
static const char rgb_words[] = "three numbers (red, green, blue), 0 to 1";

static const ShardPyChoice layouts[] = {
    {"nchw", SHARD_LAYOUT_NCHW, 0}, {"nhwc", SHARD_LAYOUT_NHWC, 0}, {NULL, 0, 0}};

/* ---- ShardReaderSettings (reader.h): Reader, Loader ------------------------------------- */

#define R(f) offsetof(ShardReaderSettings, f)

static const ShardPyChoice modes[] = {
    {"exact", SHARD_MODE_EXACT, 0}, {"equal", SHARD_MODE_EQUAL, 0},
    {"resampled", SHARD_MODE_RESAMPLED, 0}, {NULL, 0, 0}};

static const ShardPyChoice index_makings[] = {
    {"auto", SHARD_READER_INDEXES_AUTO, 0}, {"always", SHARD_READER_INDEXES_ALWAYS, 0},
    {"never", SHARD_READER_INDEXES_NEVER, 0}, {NULL, 0, 0}};

static const ShardPySetting reader_rows[] = {
    {.name = "seed", .kind = SHARD_PY_INT, .field = SHARD_PY_F_U64, .offset = R(seed),
     .offset2 = R(have_seed), .flags = SHARD_PY_NONE | SHARD_PY_GIVEN | SHARD_PY_MIN,
     .doc = "the seed of every random choice (shard order, shuffle, augmentation); None: a "
            "fresh one"},
    {.name = "epoch", .kind = SHARD_PY_INT, .field = SHARD_PY_F_U64, .offset = R(epoch),
     .flags = SHARD_PY_PLACEMENT, .doc = "the epoch to start at"},
    {.name = "rank", .kind = SHARD_PY_INT, .field = SHARD_PY_F_INT, .offset = R(rank),
     .flags = SHARD_PY_PLACEMENT | SHARD_PY_MIN, .min = -1,
     .doc = "this consumer's rank; -1: $RANK, else 0"},
    {.name = "world_size", .kind = SHARD_PY_INT, .field = SHARD_PY_F_INT,
     .offset = R(world_size), .flags = SHARD_PY_PLACEMENT | SHARD_PY_MIN, .min = -1,
     .doc = "ranks in the job; -1: $WORLD_SIZE, else 1"},
    {.name = "worker", .kind = SHARD_PY_INT, .field = SHARD_PY_F_INT, .offset = R(worker),
     .flags = SHARD_PY_PLACEMENT | SHARD_PY_MIN, .min = 0,
     .doc = "this consumer's worker within its rank"},
    {.name = "num_workers", .kind = SHARD_PY_INT, .field = SHARD_PY_F_INT,
     .offset = R(num_workers), .flags = SHARD_PY_PLACEMENT | SHARD_PY_MIN, .min = 1,
     .doc = "workers per rank"},
    {.name = "mode", .kind = SHARD_PY_CHOICE, .field = SHARD_PY_F_INT, .offset = R(mode),
     .choices = modes,
     .doc = "how an epoch is split between consumers: 'exact' (each sample once), 'equal' "
            "(the same count per rank; needs sample counts), 'resampled' (shards drawn with "
            "replacement)"},
    {.name = "pad", .kind = SHARD_PY_BOOL, .field = SHARD_PY_F_INT, .offset = R(pad),
     .doc = "equal mode: pad the remainder with repeated samples instead of dropping it"},
    {.name = "epoch_samples", .kind = SHARD_PY_INT, .field = SHARD_PY_F_U64,
     .offset = R(epoch_samples),
     .doc = "samples per consumer and epoch; 0: a pass over the data (resampled: endless)"},
    {.name = "shuffle_shards", .kind = SHARD_PY_BOOL, .field = SHARD_PY_F_INT,
     .offset = R(shuffle_shards), .doc = "shuffle the shard order each epoch"},
    {.name = "shuffle", .kind = SHARD_PY_INT, .field = SHARD_PY_F_SIZE,
     .offset = R(shuffle_buffer), .doc = "samples in the shuffle buffer; 0: none"},
    {.name = "shuffle_initial", .kind = SHARD_PY_INT, .field = SHARD_PY_F_SIZE,
     .offset = R(shuffle_initial),
     .doc = "samples in the buffer before the first is yielded; 0: the whole buffer"},
    {.name = "streams", .kind = SHARD_PY_INT, .field = SHARD_PY_F_SIZE, .offset = R(streams),
     .flags = SHARD_PY_MIN, .min = 1, .doc = "shards read at once and interleaved"},
    {.name = "queue_depth", .kind = SHARD_PY_INT, .field = SHARD_PY_F_SIZE,
     .offset = R(queue_depth), .flags = SHARD_PY_MIN, .min = 1,
     .doc = "samples read ahead per stream"},
    {.name = "skip_errors", .kind = SHARD_PY_BOOL, .field = SHARD_PY_F_INT,
     .offset = R(skip_errors),
     .doc = "skip bad shards and samples (counted, the first errors kept) instead of failing"},
    {.name = "manifest_commands", .kind = SHARD_PY_BOOL, .field = SHARD_PY_F_INT,
     .offset = R(manifest_commands),
     .doc = "let a manifest list pipe:COMMAND shards; off: a manifest runs nothing"},
    {.name = "manifest_local", .kind = SHARD_PY_BOOL, .field = SHARD_PY_F_INT,
     .offset = R(manifest_local),
     .doc = "let a remote manifest list local paths and file:// URLs; off: it reaches remote "
            "shards only"},
    {.name = "memory_budget", .kind = SHARD_PY_INT, .field = SHARD_PY_F_SIZE,
     .offset = R(memory_budget),
     .doc = "bytes the streams may hold read ahead, all together; 0: only queue_depth "
            "bounds them"},
    {.name = "make_indexes", .kind = SHARD_PY_CHOICE, .field = SHARD_PY_F_INT,
     .offset = R(make_indexes), .choices = index_makings,
     .doc = "index shards that have no count (plain tars) at open, kept in index_cache: "
            "'auto' all where the mode needs counts (a mix, equal mode, epoch_samples), else "
            "uncompressed tars, local or remote (a walk over their headers), 'always', 'never'"},
    {.name = "partitions", .kind = SHARD_PY_INT, .field = SHARD_PY_F_U32,
     .offset = R(partitions), .flags = SHARD_PY_MIN, .min = 0,
     .doc = "canonical partitions of an epoch, each a deterministic stream that ranks and "
            "workers take whole where they fit and a resume splits where it must "
            "(formats/order.md); 0: chosen from the data and the starting topology (a state "
            "keeps its own and resumes on any topology)"},
    {.name = "aspect_buckets", .kind = SHARD_PY_TEXT, .field = SHARD_PY_F_STR,
     .offset = R(aspect_buckets), .flags = SHARD_PY_NONE,
     .doc = "batches of one aspect bucket each, planned on the epoch's order: 'HxW,HxW,...', "
            "'sdxl' or 'auto[:K]' (scaled to aspect_side); each sample goes to the bucket "
            "nearest its image's aspect (the shards' image sizes); None: none"},
    {.name = "aspect_side", .kind = SHARD_PY_INT, .field = SHARD_PY_F_INT,
     .offset = R(aspect_side), .flags = SHARD_PY_MIN, .min = 8,
     .doc = "Reader: the side 'sdxl' and 'auto' buckets are scaled to (their area its "
            "square); the loader and the datasets scale them to image_size's area"},
    {.name = "index_cache", .kind = SHARD_PY_PATH, .field = SHARD_PY_F_STR,
     .offset = R(index_cache), .flags = SHARD_PY_NONE,
     .doc = "the folder of the indexes libshard makes; None: cache_dir/index, else "
            "$XDG_CACHE_HOME/libshard/index"},
    {.name = "keys", .kind = SHARD_PY_PATH, .field = SHARD_PY_F_STR, .offset = R(keys),
     .flags = SHARD_PY_NONE,
     .doc = "a view: a file of sample keys, one a line (ShardDataset also takes a list of "
            "keys); only those samples are planned and read, each found in its shard's "
            "index; keys that choose no sample are counted; None: every sample"},
};

static void reader_defaults(void *s) { shard_reader_default_settings(s); }

const ShardPyTable shard_py_reader_table = {"reader", "ShardReaderSettings",
                                            sizeof(ShardReaderSettings), reader_defaults,
                                            ROWS(reader_rows)};

/* The reader's batches, which a Loader sets from its own (Reader alone) */
static const ShardPySetting reader_batch_rows[] = {
    {.name = "batch_size", .kind = SHARD_PY_INT, .field = SHARD_PY_F_U64, .offset = R(batch_size),
     .flags = SHARD_PY_MIN, .min = 1,
     .doc = "the batches the samples are taken in: equal mode's repeats and states count in "
            "them, aspect_buckets batches this many"},
    {.name = "drop_last", .kind = SHARD_PY_BOOL, .field = SHARD_PY_F_INT, .offset = R(drop_last),
     .doc = "a short last batch is dropped (aspect_buckets: the partial ones)"},
};

const ShardPyTable shard_py_reader_batch_table = {"reader_batches", "ShardReaderSettings",
                                                  sizeof(ShardReaderSettings), reader_defaults,
                                                  ROWS(reader_batch_rows)};

/* ---- ShardRemoteSettings (remote.h): Reader, Loader, ShardFiles, list_shards ----------- */

#define RM(f) offsetof(ShardRemoteSettings, f)

/* The network's rows, shared by reading (remote) and writing (bucket). */
#define NET_ROWS                                                                                     \
    {.name = "retries", .kind = SHARD_PY_INT, .field = SHARD_PY_F_INT, .offset = RM(retries),       \
     .flags = SHARD_PY_MIN, .min = 0, .doc = "retries of a request that made no progress"},         \
    {.name = "timeout", .kind = SHARD_PY_REAL, .field = SHARD_PY_F_DOUBLE,                           \
     .offset = RM(connect_timeout), .flags = SHARD_PY_MIN, .min = 0,                                 \
     .doc = "seconds to connect"},                                                                   \
    {.name = "stall_timeout", .kind = SHARD_PY_REAL, .field = SHARD_PY_F_DOUBLE,                     \
     .offset = RM(stall_timeout), .flags = SHARD_PY_MIN, .min = 0,                                   \
     .doc = "seconds a transfer may stall before it is cut and resumed"},                            \
    {.name = "backoff", .kind = SHARD_PY_REAL, .field = SHARD_PY_F_DOUBLE, .offset = RM(backoff),   \
     .flags = SHARD_PY_MIN, .min = 0, .doc = "the first retry's delay in seconds, doubled each time"}, \
    {.name = "ca_bundle", .kind = SHARD_PY_PATH, .field = SHARD_PY_F_STR, .offset = RM(ca_bundle),  \
     .flags = SHARD_PY_NONE,                                                                         \
     .doc = "the CA bundle TLS peers are verified with; None: CURL_CA_BUNDLE, SSL_CERT_FILE, the "   \
            "system's"},                                                                             \
    {.name = "gcs_token", .kind = SHARD_PY_TEXT, .field = SHARD_PY_F_STR, .offset = RM(gcs_token),  \
     .flags = SHARD_PY_NONE,                                                                         \
     .doc = "a Google access token; None: GOOGLE_OAUTH_ACCESS_TOKEN, then the credential chain"}

static const ShardPySetting remote_rows[] = {
    {.name = "cache_dir", .kind = SHARD_PY_PATH, .field = SHARD_PY_F_STR, .offset = RM(cache_dir),
     .flags = SHARD_PY_NONE,
     .doc = "a folder that keeps remote shards, shared by the processes of a machine; None: "
            "no cache"},
    {.name = "cache_size", .kind = SHARD_PY_INT, .field = SHARD_PY_F_U64,
     .offset = RM(cache_bytes),
     .doc = "the cache's size limit in bytes; 0: 10% of the file system's free space"},
    NET_ROWS,
};

static void remote_defaults(void *s) { shard_remote_default_settings(s); }

const ShardPyTable shard_py_remote_table = {"remote", "ShardRemoteSettings",
                                            sizeof(ShardRemoteSettings), remote_defaults,
                                            ROWS(remote_rows)};

/* ---- ShardRemoteSettings for writing (remote.h): Writer, PackPlan into gs:// and s3:// --- */

static const ShardPySetting bucket_rows[] = {
    NET_ROWS,
    {.name = "upload_part", .kind = SHARD_PY_INT, .field = SHARD_PY_F_U64,
     .offset = RM(upload_part), .flags = SHARD_PY_MIN, .min = 1,
     .doc = "objects written into gs:// or s3:// go up in parts of this many bytes (S3: at "
            "least 5 MiB; GCS: rounded up to 256 KiB), in one request when they fit in one"},
};

const ShardPyTable shard_py_bucket_table = {"bucket", "ShardRemoteSettings",
                                            sizeof(ShardRemoteSettings), remote_defaults,
                                            ROWS(bucket_rows)};

/* ---- ShardLoaderSettings (loader.h): Loader --------------------------------------------- */

#define L(f) offsetof(ShardLoaderSettings, f)

static const ShardPySetting loader_rows[] = {
    {.name = "batch_size", .kind = SHARD_PY_INT, .field = SHARD_PY_F_SIZE, .offset = L(batch_size),
     .flags = SHARD_PY_MIN, .min = 1, .doc = "samples per batch"},
    {.name = "drop_last", .kind = SHARD_PY_BOOL, .field = SHARD_PY_F_INT, .offset = L(drop_last),
     .doc = "drop the epoch's partial last batch"},
    {.name = "threads", .kind = SHARD_PY_INT, .field = SHARD_PY_F_INT, .offset = L(threads),
     .flags = SHARD_PY_MIN, .min = 0,
     .doc = "decode threads; 0: one per CPU this process may use"},
    {.name = "batches", .kind = SHARD_PY_INT, .field = SHARD_PY_F_SIZE, .offset = L(batches),
     .flags = SHARD_PY_MIN, .min = 2,
     .doc = "batch buffers in the ring: prefetch depth plus the batches held"},
    {.name = "image_fields", .kind = SHARD_PY_TEXT, .field = SHARD_PY_F_STR,
     .offset = L(image_fields), .accepts = fields_words,
     .doc = "field names tried in order for the image"},
    {.name = "label_field", .kind = SHARD_PY_TEXT, .field = SHARD_PY_F_STR,
     .offset = L(label_field), .flags = SHARD_PY_NONE, .accepts = fields_words,
     .doc = "the field holding a decimal class index; None: no labels"},
    {.name = "raw_fields", .kind = SHARD_PY_TEXT, .field = SHARD_PY_F_STR,
     .offset = L(raw_fields), .flags = SHARD_PY_NONE, .accepts = fields_words,
     .doc = "fields carried raw into each batch; '*': every field but the image and the "
            "label; None or '': none"},
    {.name = "missing_label", .kind = SHARD_PY_LABEL, .field = SHARD_PY_F_INT,
     .offset = L(missing_label),
     .doc = "a sample without a valid label: 'error' (skipped with skip_errors), or -1 for "
            "its label"},
    {.name = "decode_memory", .kind = SHARD_PY_INT, .field = SHARD_PY_F_SIZE,
     .offset = L(decode_memory), .flags = SHARD_PY_MIN, .min = 0,
     .doc = "bytes the decode threads' decodes take together; a decode waits for room (0: no "
            "bound)"},
    {.name = "trace", .kind = SHARD_PY_PATH, .field = SHARD_PY_F_STR, .offset = L(trace_path),
     .flags = SHARD_PY_NONE,
     .doc = "where to write the stages' spans (Chrome trace event JSON) when the loader is "
            "freed; None: nowhere"},
};

static void loader_defaults(void *s) { shard_loader_default_settings(s); }

const ShardPyTable shard_py_loader_table = {"loader", "ShardLoaderSettings",
                                            sizeof(ShardLoaderSettings), loader_defaults,
                                            ROWS(loader_rows)};

/* ---- ShardTransform (decode.h): Loader, decode, crop_box -------------------------------- */

#define T(f) offsetof(ShardTransform, f)

static const ShardPyChoice crops[] = {
    {"random_resized", SHARD_CROP_RANDOM_RESIZED, 0}, {"center", SHARD_CROP_CENTER, 0},
    {"none", SHARD_CROP_NONE, 0}, {"resize", SHARD_CROP_NONE, 1},
    {"cover", SHARD_CROP_COVER, 0}, {"cover_random", SHARD_CROP_COVER_RANDOM, 0}, {NULL, 0, 0}};
static const ShardPyChoice dtypes[] = {
    {"uint8", SHARD_DTYPE_UINT8, 0}, {"float32", SHARD_DTYPE_FLOAT32, 0}, {NULL, 0, 0}};

static const ShardPySetting transform_rows[] = {
    {.name = "image_size", .kind = SHARD_PY_SIZE, .field = SHARD_PY_F_INT, .offset = T(width),
     .offset2 = T(height), .flags = SHARD_PY_MIN, .min = 1,
     .accepts = "an int or a pair of ints (height, width)",
     .doc = "the images' size: an int, or (height, width)"},
    {.name = "crop", .kind = SHARD_PY_CHOICE, .field = SHARD_PY_F_INT, .offset = T(crop),
     .choices = crops,
     .doc = "'random_resized' (RandomResizedCrop, for training), 'center' (for evaluation), "
            "'none' (the whole image resized), 'cover' (resized to cover the size, aspect kept, "
            "the middle taken: an aspect bucket's crop) or 'cover_random' (a random place)"},
    {.name = "flip", .kind = SHARD_PY_BOOL, .field = SHARD_PY_F_INT, .offset = T(flip),
     .doc = "a random horizontal flip"},
    {.name = "fast", .kind = SHARD_PY_BOOL, .field = SHARD_PY_F_INT, .offset = T(fast),
     .doc = "decode only the crop, at a reduced DCT scale"},
    {.name = "layout", .kind = SHARD_PY_CHOICE, .field = SHARD_PY_F_INT, .offset = T(layout),
     .choices = layouts, .doc = "'nchw' or 'nhwc'"},
    {.name = "dtype", .kind = SHARD_PY_CHOICE, .field = SHARD_PY_F_INT, .offset = T(dtype),
     .choices = dtypes, .doc = "'uint8', or 'float32' normalized with mean and std"},
    {.name = "mean", .kind = SHARD_PY_NUMBERS, .field = SHARD_PY_F_FLOAT, .offset = T(mean),
     .count = 3, .accepts = rgb_words, .doc = "per channel, subtracted for float32"},
    {.name = "std", .kind = SHARD_PY_NUMBERS, .field = SHARD_PY_F_FLOAT, .offset = T(std),
     .count = 3, .accepts = rgb_words, .doc = "per channel, divided by for float32"},
    {.name = "scale", .kind = SHARD_PY_NUMBERS, .field = SHARD_PY_F_DOUBLE,
     .offset = T(scale_min), .count = 2,
     .accepts = "two numbers (smallest, largest area share)",
     .doc = "random_resized: the crop's share of the image's area"},
    {.name = "ratio", .kind = SHARD_PY_NUMBERS, .field = SHARD_PY_F_DOUBLE,
     .offset = T(ratio_min), .count = 2,
     .accepts = "two numbers (smallest, largest aspect ratio)",
     .doc = "random_resized: the crop's aspect ratio"},
    {.name = "max_decode_memory", .kind = SHARD_PY_INT, .field = SHARD_PY_F_U64,
     .offset = T(max_decode_memory), .flags = SHARD_PY_MIN, .min = 1,
     .doc = "the most bytes one decode may take as its header says (a progressive JPEG's "
            "coefficients and the pixels); a larger image is an error"},
    {.name = "max_scans", .kind = SHARD_PY_INT, .field = SHARD_PY_F_U32, .offset = T(max_scans),
     .flags = SHARD_PY_MIN, .min = 1,
     .doc = "the most scans a JPEG may have (each walks every block: the decode's time)"},
};

/* The output size as decode and crop_box take it (Loader takes image_size). */
static const ShardPySetting output_rows[] = {
    {.name = "width", .kind = SHARD_PY_INT, .field = SHARD_PY_F_INT, .offset = T(width),
     .flags = SHARD_PY_MIN, .min = 1, .doc = "the output's width"},
    {.name = "height", .kind = SHARD_PY_INT, .field = SHARD_PY_F_INT, .offset = T(height),
     .flags = SHARD_PY_MIN, .min = 1, .doc = "the output's height"},
};

static void transform_defaults(void *t) { shard_transform_default_settings(t); }

const ShardPyTable shard_py_transform_table = {"transform", "ShardTransform",
                                               sizeof(ShardTransform), transform_defaults,
                                               ROWS(transform_rows)};
const ShardPyTable shard_py_output_table = {"output", "ShardTransform", sizeof(ShardTransform),
                                            transform_defaults, ROWS(output_rows)};

/* ---- ShardUploadSettings (gpu.h): Uploader ---------------------------------------------- */

#define U(f) offsetof(ShardUploadSettings, f)

static const ShardPyChoice gpu_dtypes[] = {
    {"uint8", SHARD_GPU_UINT8, 0}, {"float32", SHARD_GPU_FLOAT32, 0},
    {"float16", SHARD_GPU_FLOAT16, 0}, {"bfloat16", SHARD_GPU_BFLOAT16, 0}, {NULL, 0, 0}};

static const ShardPyChoice decoders[] = {
    {"auto", SHARD_DECODER_AUTO, 0}, {"cpu", SHARD_DECODER_CPU, 0}, {"gpu", SHARD_DECODER_GPU, 0},
    {NULL, 0, 0}};

static const ShardPySetting upload_rows[] = {
    {.name = "buffers", .kind = SHARD_PY_INT, .field = SHARD_PY_F_SIZE, .offset = U(buffers),
     .flags = SHARD_PY_MIN, .min = 1,
     .doc = "device buffers in the ring: the batches held, one uploading, those uploaded ahead"},
    {.name = "batch_size", .kind = SHARD_PY_INT, .field = SHARD_PY_F_SIZE,
     .offset = U(batch_size), .flags = SHARD_PY_MIN, .min = 1, .doc = "most images per batch"},
    {.name = "height", .kind = SHARD_PY_INT, .field = SHARD_PY_F_INT, .offset = U(height),
     .flags = SHARD_PY_MIN, .min = 1, .doc = "the images' height"},
    {.name = "width", .kind = SHARD_PY_INT, .field = SHARD_PY_F_INT, .offset = U(width),
     .flags = SHARD_PY_MIN, .min = 1, .doc = "the images' width"},
    {.name = "dtype", .kind = SHARD_PY_CHOICE, .field = SHARD_PY_F_INT, .offset = U(dtype),
     .choices = gpu_dtypes,
     .doc = "on the GPU: 'uint8', or normalized with mean and std: 'float32', 'float16', "
            "'bfloat16'"},
    {.name = "layout", .kind = SHARD_PY_CHOICE, .field = SHARD_PY_F_INT, .offset = U(layout),
     .choices = layouts, .doc = "on the GPU: 'nchw' or 'nhwc'"},
    {.name = "mean", .kind = SHARD_PY_NUMBERS, .field = SHARD_PY_F_FLOAT, .offset = U(mean),
     .count = 3, .accepts = rgb_words, .doc = "per channel, subtracted for the float types"},
    {.name = "std", .kind = SHARD_PY_NUMBERS, .field = SHARD_PY_F_FLOAT, .offset = U(std),
     .count = 3, .accepts = rgb_words, .doc = "per channel, divided by for the float types"},
    {.name = "decoder", .kind = SHARD_PY_CHOICE, .field = SHARD_PY_F_INT, .offset = U(decoder),
     .choices = decoders,
     .doc = "who decodes the loader's JPEGs: 'auto' (the CPU threads and the GPU's JPEG "
            "decoder, split by measured throughput; the CPU alone where the GPU's decoder "
            "cannot start), 'cpu', or 'gpu' (every JPEG the GPU takes)"},
};

static void upload_defaults(void *s) { shard_upload_default_settings(s); }

const ShardPyTable shard_py_upload_table = {"upload", "ShardUploadSettings",
                                            sizeof(ShardUploadSettings), upload_defaults,
                                            ROWS(upload_rows)};

/* ---- ShardWriterSettings (writer.h): Writer, and ShardPackSettings (pack.h): PackPlan --- */

#define W(f) offsetof(ShardWriterSettings, f)
#define P(f) offsetof(ShardPackSettings, f)

static const char digest_words[] = "\"sha256\", \"md5\", \"md5,sha256\" or \"none\"";

static const ShardPySetting writer_rows[] = {
    {.name = "maxcount", .kind = SHARD_PY_WHOLE, .field = SHARD_PY_F_U64, .offset = W(maxcount),
     .flags = SHARD_PY_NONE, .doc = "samples per shard; 0: no limit"},
    {.name = "maxsize", .kind = SHARD_PY_WHOLE, .field = SHARD_PY_F_U64, .offset = W(maxsize),
     .flags = SHARD_PY_NONE, .doc = "bytes per shard; 0: no limit"},
    {.name = "first_shard", .kind = SHARD_PY_WHOLE, .field = SHARD_PY_F_U64,
     .offset = W(first_shard), .flags = SHARD_PY_NONE, .doc = "the first shard's number"},
    {.name = "level", .kind = SHARD_PY_INT, .field = SHARD_PY_F_INT, .offset = W(level),
     .doc = "zstd level, 1 to 22"},
    {.name = "frame_size", .kind = SHARD_PY_WHOLE, .field = SHARD_PY_F_SIZE,
     .offset = W(frame_size), .flags = SHARD_PY_NONE,
     .doc = "uncompressed bytes per zstd frame"},
    {.name = "mtime", .kind = SHARD_PY_INT, .field = SHARD_PY_F_I64, .offset = W(mtime),
     .doc = "every member's mtime"},
    {.name = "checksums", .kind = SHARD_PY_DIGESTS, .field = SHARD_PY_F_INT,
     .offset = W(checksums), .flags = SHARD_PY_NONE, .accepts = digest_words,
     .doc = "the digests of each shard in its manifest entry"},
    {.name = "sync", .kind = SHARD_PY_BOOL, .field = SHARD_PY_F_INT, .offset = W(sync),
     .doc = "fsync shards and folders before renaming them into place"},
    {.name = "index", .kind = SHARD_PY_BOOL, .field = SHARD_PY_F_INT, .offset = W(write_index),
     .doc = "write the .idx beside each shard, and its image sizes (.cols) beside it"},
};

static const ShardPySetting pack_rows[] = {
    {.name = "maxcount", .kind = SHARD_PY_WHOLE, .field = SHARD_PY_F_U64, .offset = P(maxcount),
     .flags = SHARD_PY_NONE, .doc = "samples per shard; 0: no limit"},
    {.name = "maxsize", .kind = SHARD_PY_WHOLE, .field = SHARD_PY_F_U64, .offset = P(maxsize),
     .flags = SHARD_PY_NONE, .doc = "bytes per shard; 0: no limit"},
    {.name = "level", .kind = SHARD_PY_INT, .field = SHARD_PY_F_INT, .offset = P(level),
     .doc = "zstd level, 1 to 22"},
    {.name = "frame_size", .kind = SHARD_PY_WHOLE, .field = SHARD_PY_F_SIZE,
     .offset = P(frame_size), .flags = SHARD_PY_NONE,
     .doc = "uncompressed bytes per zstd frame"},
    {.name = "shuffle", .kind = SHARD_PY_WHOLE, .field = SHARD_PY_F_U64,
     .offset = P(shuffle_seed), .offset2 = P(shuffle), .flags = SHARD_PY_NONE | SHARD_PY_GIVEN,
     .doc = "shuffle the inputs across the set with this seed; None: in order"},
    {.name = "verify", .kind = SHARD_PY_BOOL, .field = SHARD_PY_F_INT, .offset = P(verify),
     .doc = "decode every JPEG fully: a corrupt one is a bad input"},
    {.name = "mtime", .kind = SHARD_PY_INT, .field = SHARD_PY_F_I64, .offset = P(mtime),
     .doc = "every member's mtime (negative: 0)"},
    {.name = "checksums", .kind = SHARD_PY_DIGESTS, .field = SHARD_PY_F_INT,
     .offset = P(checksums), .flags = SHARD_PY_NONE, .accepts = digest_words,
     .doc = "the digests of each shard in the manifest"},
    {.name = "sync", .kind = SHARD_PY_BOOL, .field = SHARD_PY_F_INT, .offset = P(sync),
     .doc = "fsync before renaming into place"},
    {.name = "resize", .kind = SHARD_PY_WHOLE, .field = SHARD_PY_F_U32, .offset = P(max_side),
     .flags = SHARD_PY_NONE | SHARD_PY_MAX, .max = 65500,
     .accepts = "a longer side of 1..65500 pixels",
     .doc = "re-encode a JPEG whose longer side is longer, to this side; 0 or None: as it is"},
    {.name = "quality", .kind = SHARD_PY_INT, .field = SHARD_PY_F_INT, .offset = P(quality),
     .doc = "JPEG quality, 1 to 100, for resize"},
    {.name = "resume", .kind = SHARD_PY_BOOL, .field = SHARD_PY_F_INT, .offset = P(resume),
     .doc = "keep what an interrupted run of this plan finished, pack the rest"},
    {.name = "dedup", .kind = SHARD_PY_BOOL, .field = SHARD_PY_F_INT, .offset = P(dedup),
     .doc = "pack each distinct image once (local inputs)"},
};

static void writer_defaults(void *s) { shard_writer_default_settings(s); }
static void pack_defaults(void *s) { shard_pack_default_settings(s); }

const ShardPyTable shard_py_writer_table = {"writer", "ShardWriterSettings",
                                            sizeof(ShardWriterSettings), writer_defaults,
                                            ROWS(writer_rows)};
const ShardPyTable shard_py_pack_table = {"pack", "ShardPackSettings", sizeof(ShardPackSettings),
                                          pack_defaults, ROWS(pack_rows)};
