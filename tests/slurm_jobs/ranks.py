"""A tiny srun-native multi-rank program: every rank logs a few steps; one rank fails.

Rank = SLURM_PROCID (no torch). FAIL_RANK picks the failing rank (default 2); FAIL_MODE:
  import  - the failing rank imports a module that does not exist (ModuleNotFoundError)
  none    - nobody fails
The other ranks print their steps and exit 0 after a short wait (or are killed by srun -K).
"""
import os
import time

rank = int(os.environ.get("SLURM_PROCID", "0"))
world = int(os.environ.get("SLURM_NTASKS", "1"))
fail_rank = int(os.environ.get("FAIL_RANK", "2"))
mode = os.environ.get("FAIL_MODE", "import")


def load_plugin(name):
    __import__(name)


print(f"rank {rank}/{world} on {os.environ.get('SLURMD_NODENAME', '?')}: starting", flush=True)
for step in range(3):
    print(f"rank {rank}: step {step} loss {2.0 / (step + 1):.3f}", flush=True)
    time.sleep(0.2)
    if rank == fail_rank and step == 1 and mode == "import":
        load_plugin("slurmdoc_test_missing_plugin")
time.sleep(float(os.environ.get("OTHERS_WAIT", "3")))
print(f"rank {rank}: done", flush=True)
