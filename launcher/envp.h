/*
 * Environment arrays built in the parent for each worker: a malloc'd,
 * NULL-terminated array of malloc'd "NAME=value" strings, grown with
 * realloc.  bind_worker_env() and the launcher add to the same array.
 */
#ifndef AMLRUN_ENVP_H
#define AMLRUN_ENVP_H

/* A deep copy of `src` (NULL: empty); NULL when out of memory. */
char **envp_dup(char *const *src);
/* Replace or add NAME=value; 0, or -1 when out of memory. */
int envp_set(char ***envp, const char *name, const char *value);
/* The value of NAME, or NULL. */
const char *envp_get(char *const *envp, const char *name);
/* Remove NAME if present. */
void envp_unset(char **envp, const char *name);
void envp_free(char **envp);

#endif /* AMLRUN_ENVP_H */
