/*
 * The workers' Python when none is named (--python, AMLRUN_PYTHON,
 * PYTHON_EXEC).  torchrun's workers run under torchrun's own interpreter,
 * the one that has torch; amlrun is a C program, and PATH's first python3
 * may be a version manager's shim (pyenv, conda) whose Python has none:
 * every rank then fails with "No module named 'torch'".  So the workers
 * get the first python3 whose packages hold torch, asked as torchver.c
 * asks (importlib's find_spec: nothing imported), among each python3 of
 * PATH in order, then /usr/bin/python3; none has it: PATH's first, as
 * before.
 */
#ifndef AMLRUN_PYCHOOSE_H
#define AMLRUN_PYCHOOSE_H

struct py_choice {
    char *path;   /* the chosen interpreter (malloc'd), NULL: none found */
    int first;    /* it is PATH's first python3 */
    int torch;    /* torch_probe()'s answer for it */
    char *why;    /* why it, in words for the command's "how" (malloc'd) */
    char tried[512]; /* the others asked before it, and their answers */
};

/* Choose among PATH_ENV's python3s (see above).  0, or -1 with errno
 * (ENOENT: no python3 anywhere, ENOMEM). */
int python_choose(const char *path_env, struct py_choice *out);
/* Whether the script at PATH (a Python file) has a line importing torch
 * ("import torch...", "from torch..."), read from its first 256 KiB. */
int script_imports_torch(const char *path);
void py_choice_free(struct py_choice *ch);

#endif /* AMLRUN_PYCHOOSE_H */
