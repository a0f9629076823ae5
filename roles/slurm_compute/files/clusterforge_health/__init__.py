# Installed by the clusterforge.gpu collection (role slurm_compute); local changes are overwritten.
"""The ClusterForge Slurm node health check's code, one module per check (installed by clusterforge.gpu.slurm_compute
beside the program, slurm_healthcheck.py, whose docstring describes what it does; the program only calls main.main).

  core            configuration and its problems, logging, the time budget, commands (run), one run's faults (Run)
  check_gpu       gpu_count, ecc, retired_pages, row_remap, temperature; pcie, throttle, mig
  check_nvlink    nvlink
  check_xid       xid
  check_dcgm      dcgm_health, dcgm_diag
  check_lustre    lustre
  check_ib        ib_port
  check_services  fabric_manager, peermem, boot_units
  state           the strike state under its lock, the boot id, the strike count of a run
  slurm           scontrol: the node's state, the drains with the prefix, the decision (drain, update, resume, none)
  breaker         the circuit breaker's cap and its count after a drain
  metrics         atomic writes, the run's record and the metrics file
  main            the arguments, one run, --clear

The modules import the collection's parsers, installed beside the program as clusterforge_<name>.py
(roles/slurm_compute/tasks/config.yml): plugins/module_utils/slurm.py (the one rule of whose drain reason may be
replaced or resumed, shared with the slurm_node module, and the scontrol parser), infiniband.py (ibstat and the ports
in sysfs, shared with ib_port_info), nvidia_smi.py (--query-gpu CSV, shared with nvidia_smi_info, and nvlink -s / -e),
healthcheck.py (the checks, their strikes, the DCGM codes and the reason-prefix rule, shared with preflight) and
dcgm.py (where this node's host engine listens, as the dcgm role recorded it: the dcgm modules read it the same way).
Only the standard library and those modules: the node runs this with its own /usr/bin/python3.
"""
