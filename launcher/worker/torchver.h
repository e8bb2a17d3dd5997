/*
 * The version of the torch the workers will import, found without
 * importing it: the worker's Python is asked where the package "torch"
 * lies (importlib's find_spec, which loads nothing), and its version.py is
 * read.  amlrun sets the variables of the torchrun that matches that torch
 * (workerenv.c: the NCCL error handling variable's name).
 */
#ifndef AMLRUN_TORCHVER_H
#define AMLRUN_TORCHVER_H

#include "worker/command.h"

/* MAJOR * 1000 + MINOR (2008 for 2.8.0+cu128), or 0 when unknown: the
 * command does not run under a Python, that Python has no torch, or it
 * did not answer within a few seconds.  `env` is the workers' base
 * environment (PYTHONPATH and all). */
int torch_version(const struct command *c, char *const *env);
/* What PYTHON says of its torch: MAJOR * 1000 + MINOR, 0 (torch there, its
 * version unread), TORCH_NONE (no torch) or TORCH_NO_ANSWER (it did not
 * run, or said nothing within a few seconds). */
enum { TORCH_NONE = -1, TORCH_NO_ANSWER = -2 };
int torch_probe(const char *python, char *const *env);

#endif /* AMLRUN_TORCHVER_H */
