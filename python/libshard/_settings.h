/*
 * The settings tables: one per C settings struct the binding takes keywords for
 * (_tables.c), each row a Python keyword with its type, its field in the struct, what it
 * accepts and a short doc. Defaults are never written here: they are read from the
 * struct's shard_*_default_settings function. From the tables come the keyword parsing of
 * every constructor and function that takes settings, the checks and their messages, the
 * tables as Python data (libshard.settings, the datasets' key lists) and the type stub.
 */
#ifndef LIBSHARD_PY_SETTINGS_H
#define LIBSHARD_PY_SETTINGS_H

#include <Python.h>

#include <stddef.h>

/* What a setting accepts from Python; each kind has its check and its messages. */
typedef enum ShardPyKind {
    SHARD_PY_INT,     /* an int (not a bool), from min to max and within its field's range */
    SHARD_PY_WHOLE,   /* an int or an integral float, >= 0 (maxsize=3e9, as WebDataset's) */
    SHARD_PY_BOOL,    /* True or False (or 0 and 1) */
    SHARD_PY_REAL,    /* a number, at least min */
    SHARD_PY_TEXT,    /* a str */
    SHARD_PY_PATH,    /* a str or an os.PathLike, kept as a str */
    SHARD_PY_CHOICE,  /* one of the choices' names, stored as its value */
    SHARD_PY_NUMBERS, /* count numbers: a sequence, or anything with tolist() (an array) */
    SHARD_PY_SIZE,    /* an int, or a pair of ints (height, width): width at offset, height
                         at offset2 */
    SHARD_PY_LABEL,   /* 'error' (SHARD_LABEL_ERROR) or -1 (SHARD_LABEL_MINUS_ONE) */
    SHARD_PY_DIGESTS, /* "sha256", "md5", "md5,sha256" or "none", as SHARD_DIGEST_* bits */
    SHARD_PY_KINDS
} ShardPyKind;

/* How the value is stored in the struct. */
typedef enum ShardPyField {
    SHARD_PY_F_INT,    /* int (and the enums, which are int-sized) */
    SHARD_PY_F_U32,    /* uint32_t */
    SHARD_PY_F_I64,    /* int64_t */
    SHARD_PY_F_U64,    /* uint64_t */
    SHARD_PY_F_SIZE,   /* size_t */
    SHARD_PY_F_DOUBLE, /* double (count of them for NUMBERS) */
    SHARD_PY_F_FLOAT,  /* float (count of them for NUMBERS) */
    SHARD_PY_F_STR,    /* const char *, borrowed from a str the parse keeps alive */
    SHARD_PY_FIELDS
} ShardPyField;

enum {
    SHARD_PY_NONE = 1,      /* None is accepted: a NULL string, 0 digests, or for numbers
                               the default kept (the flag at offset2 cleared, with GIVEN) */
    SHARD_PY_MIN = 2,       /* min applies */
    SHARD_PY_MAX = 4,       /* max applies */
    SHARD_PY_GIVEN = 8,     /* offset2 is an int set to whether a value (not None) was given */
    SHARD_PY_PLACEMENT = 16 /* where the consumer is (epoch, rank, worker): the datasets set
                               these themselves */
};

typedef struct ShardPyChoice {
    const char *name;
    int value;
    int hidden; /* accepted, but not offered (an old spelling) */
} ShardPyChoice;

typedef struct ShardPySetting {
    const char *name; /* the Python keyword */
    ShardPyKind kind;
    ShardPyField field;
    size_t offset;    /* of the field in the struct */
    size_t offset2;   /* SIZE: the height; GIVEN: the flag */
    int count;        /* NUMBERS: how many */
    unsigned flags;   /* SHARD_PY_* */
    long long min, max;
    const ShardPyChoice *choices; /* CHOICE: ended by a NULL name */
    const char *accepts; /* what a TypeError says it takes, where the kind's words are not
                            enough ("three numbers (red, green, blue), 0 to 1") */
    const char *doc;
} ShardPySetting;

typedef struct ShardPyTable {
    const char *name;   /* "reader" */
    const char *ctype;  /* "ShardReaderSettings" */
    size_t size;        /* of the struct */
    void (*defaults)(void *s); /* the struct's default settings function */
    const ShardPySetting *rows;
    size_t nrows;
} ShardPyTable;

/* The tables (_tables.c). */
extern const ShardPyTable shard_py_reader_table, shard_py_remote_table, shard_py_bucket_table, shard_py_loader_table,
    shard_py_transform_table, shard_py_output_table, shard_py_upload_table,
    shard_py_writer_table, shard_py_pack_table, shard_py_reader_batch_table;

/* A table and the struct its keywords go into (filled with the defaults by the caller). */
typedef struct ShardPyTarget {
    const ShardPyTable *table;
    void *base;
} ShardPyTarget;

/* A callable that takes settings: its own parameters (which may also name table rows, to
 * take them by position), then the targets' rows as keyword-only arguments. */
typedef struct ShardPySignature {
    const char *name;           /* "Reader", for messages */
    const char *const *params;  /* in positional order, ended by NULL */
    int npositional;            /* how many of params may be passed by position */
    int nrequired;              /* the first nrequired params must be given */
    int params_only;            /* the targets' rows are taken only where params name them */
} ShardPySignature;

/*
 * Parses a call's arguments (_args.c): params not naming a row into values[] (borrowed, NULL where
 * not given), every setting checked and stored into its target's struct. Strings stored
 * point into objects held by *keep (a new list, released by the caller after the structs
 * are used, also on failure). 0, or -1 with the exception set.
 */
int shard_py_parse(const ShardPySignature *sig, PyObject *args, PyObject *kw,
                   const ShardPyTarget *targets, size_t ntargets, PyObject **values,
                   PyObject **keep);

/* v checked as the row says: the normalized value (an int, a bool, a float, a str, a tuple
 * or None), or NULL with the exception naming the setting. */
PyObject *shard_py_setting_check(const ShardPySetting *row, PyObject *v);

/* v checked by the row and stored into its field(s) of the struct at base (strings kept
 * alive by keep); 0, or -1 with the exception naming the setting. */
int shard_py_setting_set(const ShardPySetting *row, PyObject *v, void *base, PyObject *keep);

/* The module functions settings() and check_setting() (_describe.c), added to m; 0 or -1. */
int shard_py_settings_ready(PyObject *m);

#endif
