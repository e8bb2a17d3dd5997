/*
 * How many GPUs `--nproc-per-node gpu|auto` starts workers for.  A small
 * stand-in that counts PCI functions; the library's topology (issue 4) may
 * replace it.
 */
#ifndef AMLRUN_GPUCOUNT_H
#define AMLRUN_GPUCOUNT_H

/* NVIDIA display-class PCI functions (vendor 0x10de, class 0x0300 or
 * 0x0302) under `sysfs_pci` (normally /sys/bus/pci/devices). */
int gpu_count_pci(const char *sysfs_pci);
/* The GPUs a CUDA program would see: the PCI count, restricted by
 * `cuda_visible` ($CUDA_VISIBLE_DEVICES; NULL when unset) as CUDA does:
 * entries up to the first invalid one. */
int gpu_count_visible(int pci_count, const char *cuda_visible);

#endif /* AMLRUN_GPUCOUNT_H */
