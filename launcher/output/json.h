/*
 * amlrun's one JSON writer: --dry-run=json, --topo=json, --result-json
 * write a document with it, and the event log's lines escape their strings
 * with json_char().  Compact, one document, ending with a newline.  Bytes
 * outside printable ASCII come out as \u00XX, so that the output is valid
 * JSON whatever a command line or a file name holds.
 */
#ifndef AMLRUN_JSON_H
#define AMLRUN_JSON_H

#include <stdio.h>

#define JSON_DEPTH 16

struct json {
    FILE *f;
    int depth;
    int count[JSON_DEPTH]; /* values written so far in each open container */
    char closer[JSON_DEPTH]; /* '}' or ']' for each */
};

/* The escaped form of one byte of a JSON string, in buf (8 bytes). */
const char *json_char(unsigned char c, char buf[8]);

void json_begin(struct json *j, FILE *f);
/* Every value takes a key: a name inside an object, NULL inside an array
 * (and for the document itself). */
void json_object(struct json *j, const char *key);
void json_array(struct json *j, const char *key);
void json_close(struct json *j); /* the innermost object or array */
/* A string, or null for NULL. */
void json_str(struct json *j, const char *key, const char *val);
void json_int(struct json *j, const char *key, long long val);
/* A number, or null when val < 0 (a rank, an index not known). */
void json_id(struct json *j, const char *key, long long val);
void json_num(struct json *j, const char *key, double val, int decimals);
void json_bool(struct json *j, const char *key, int val);
void json_null(struct json *j, const char *key);
/* Close what is open, end the line, flush: 0, or -1 when a write failed. */
int json_end(struct json *j);

#endif /* AMLRUN_JSON_H */
