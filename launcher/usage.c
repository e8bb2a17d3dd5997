/* amlrun --help (kept in step with man/amlrun.1) and --version. */
#include <stdio.h>

#include "amldist.h"
#include "usage.h"

static const char usage_text[] =
"usage: amlrun [options] [--] command [args...]\n"
"       amlrun --topo [--topology FILE]\n"
"\n"
"Start a distributed training job: every worker gets RANK, LOCAL_RANK,\n"
"WORLD_SIZE, MASTER_ADDR, MASTER_PORT and the rest of torchrun's variables,\n"
"computed by libamldist.  Modes (see amlrun(1)):\n"
"  per-node     --nproc-per-node given (or no launcher found): start and\n"
"               supervise the workers of this node\n"
"  per-process  under mpirun, srun or Azure ML without --nproc-per-node:\n"
"               export the layout and exec the command in place\n"
"  head-node    --hostfile/--hosts: run one per-node amlrun on every host\n"
"A command ending in .py runs under python3 -u.  Options may also be\n"
"spelled with underscores (--nproc_per_node, --master_addr ...).\n"
"\n"
"Layout:\n"
"  --nproc-per-node N|gpu|auto  workers on this node, N up to 4096 (gpu:\n"
"                        visible NVIDIA GPUs; auto: GPUs, else CPU cores)\n"
"  --nnodes N            number of nodes (N:N accepted)\n"
"  --node-rank I         this node's rank, 0..N-1 (under a launcher these\n"
"                        two may fill in or repeat its values, not change\n"
"                        them)\n"
"  --master-addr HOST    address of rank 0's node\n"
"  --master-port PORT    port of the rendezvous store (default 29500)\n"
"  --rdzv-endpoint HOST[:PORT]  the same two, torchrun's spelling\n"
"  --rdzv-backend static|c10d   accepted; rendezvous is always env://\n"
"  --standalone          one node: 127.0.0.1 and a free port\n"
"  --no-node-check       do not check with the other nodes' amlruns, on\n"
"                        the bootstrap port, that each starts as many\n"
"                        workers before starting any\n"
"  --mode auto|node|process     force the mode (default auto)\n"
"Command:\n"
"  -m, --module          run the command as a Python module (python3 -m)\n"
"  --no-python           never run the command under python3\n"
"  --python PROG         the Python to use (default $AMLRUN_PYTHON or\n"
"                        python3 from PATH)\n"
"  --use-env             pass LOCAL_RANK only in the environment (default)\n"
"  --legacy-launch       torch.distributed.launch behaviour: append\n"
"                        --local_rank=N unless --use-env\n"
"Supervision:\n"
"  --max-restarts N      restart the local workers up to N times after a\n"
"                        failure (default 0)\n"
"  --term-timeout SEC    SIGKILL workers this long after SIGTERM (default 30)\n"
"  --ignore-sighup       ignore SIGHUP (nohup-style runs)\n"
"  --run-id ID           TORCHELASTIC_RUN_ID (also --rdzv-id; default none)\n"
"Output:\n"
"  --prefix[=FMT]        prefix each line (default \"[rank%r]:\"; %r rank,\n"
"                        %l local rank, %n node rank, %h host, %s stream)\n"
"  --tee 0|1|2|3         prefixes on none, stdout, stderr or both (torchrun)\n"
"  --log-dir DIR         also write rank<R>.stdout / rank<R>.stderr in DIR\n"
"  --ranks LIST          show only these ranks on the console (0,2,4-7)\n"
"  --local-ranks-filter LIST    the same by local rank\n"
"  --dry-run             print each rank's command and environment; start\n"
"                        nothing\n"
"  -v, --verbose         say which mode and layout source were chosen\n"
"  -q, --quiet           no notices (OMP_NUM_THREADS default, restarts)\n"
"Binding (see amlrun(1)):\n"
"  --cpu-bind none|numa|exclusive|socket|LIST   CPU binding per rank\n"
"  --mem-bind local|none memory policy\n"
"  --nic-bind none|ucx|nccl     export each rank's nearest NIC\n"
"  --gpu-bind none|single       single: CUDA_VISIBLE_DEVICES per rank\n"
"  --topology FILE       hwloc XML topology instead of this machine\n"
"  --report-bindings[=json]     one line per rank at start\n"
"  --topo                print the GPU/NIC/CPU topology matrix and exit\n"
"Head node:\n"
"  --hostfile FILE       hosts (\"host slots=N\") to start per-node amlruns on\n"
"  --hosts H1,H2,...     the same as a list\n"
"  --launcher mpirun|slurm      how to reach them (default: detect)\n"
"Other:\n"
"  -h, --help            this text\n"
"  -V, --version         amlrun and libamldist versions\n"
"\n"
"Exit status: the first failing worker's (128+N when killed by signal N),\n"
"128+N when stopped by signal N, 2 usage error, 125 amlrun failed,\n"
"126 command not executable, 127 command not found.\n";

void usage_print(FILE *f)
{
    fputs(usage_text, f);
}

void version_print(FILE *f)
{
    fprintf(f, "amlrun %d.%d.%d (libamldist %s)\n", AMLDIST_VERSION_MAJOR,
            AMLDIST_VERSION_MINOR, AMLDIST_VERSION_PATCH,
            amldist_version_string());
}
