/*
 * torchrun's TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE: the prefix of a tee'd
 * worker's lines, made as torchrun's agent makes it, with Python's
 * string.Template(template).safe_substitute(role_name=..., rank=...,
 * local_rank=...): "$$" is "$"; "${name}" and "$name" (name: an ASCII
 * letter or '_', then letters, digits, '_'; the longest such) are replaced
 * when name is role_name, rank or local_rank and kept as written
 * otherwise; any other "$" stays.
 */
#ifndef AMLRUN_LINEPREFIX_H
#define AMLRUN_LINEPREFIX_H

/* The prefix torchrun's TailLog gives a tee'd line without a template:
 * the role and the local rank, "[default0]:". */
#define TORCH_LINE_PREFIX "[${role_name}${local_rank}]:"

/* The prefix (malloc'd), or NULL when out of memory. */
char *torch_line_prefix(const char *tmpl, const char *role, int rank,
                        int local_rank);

#endif /* AMLRUN_LINEPREFIX_H */
