/*
 * The text that a running amlrun and `amlrun --status` exchange: records,
 * one a line, "TYPE key=value key=value ...", each value escaped (%XX for
 * '%', '=', spaces, control characters and DEL) so that a record is one
 * line of words whatever a host name, a command or a run id holds.  A
 * value "-" is unknown.  Unknown keys are skipped by readers, so a node of
 * a later amlrun may say more.
 */
#ifndef AMLRUN_QTEXT_H
#define AMLRUN_QTEXT_H

#include <stdio.h>

/* " key=value", the value escaped; NULL writes "-". */
void qt_str(FILE *f, const char *key, const char *val);
void qt_int(FILE *f, const char *key, long long val);
/* A number with `decimals` decimals, "-" when val < 0 (not known). */
void qt_num(FILE *f, const char *key, double val, int decimals);

/* s (NULL: "?") for a terminal: its control characters as \xNN, so that
 * text from another node or job never passes for amlrun's own; in buf,
 * cut to fit. */
const char *qt_shown(const char *s, char *buf, size_t size);

#define QT_MAX_FIELDS 32

struct qrec {
    char *type;
    int n;
    char *key[QT_MAX_FIELDS];
    char *val[QT_MAX_FIELDS]; /* unescaped; NULL for "-" */
};

/* Split line (changed in place: the fields point into it; no newline) into
 * r; 0, or -1 when it is not a record. */
int qrec_parse(char *line, struct qrec *r);
/* The value of key, NULL when absent or unknown. */
const char *qrec_get(const struct qrec *r, const char *key);
/* The value as a number, `dflt` when absent, unknown or not a number. */
double qrec_num(const struct qrec *r, const char *key, double dflt);

#endif /* AMLRUN_QTEXT_H */
